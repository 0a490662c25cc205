"""Inference methods, one module each; importing this package registers them all."""

from ppl_bnn.methods import mcmc, sgld, svi

__all__ = ["mcmc", "sgld", "svi"]
