"""Inference methods, one module each; importing this package registers them all."""

from ppl_bnn.methods import ensemble, mcmc, sghmc, sgld, svi

__all__ = ["ensemble", "mcmc", "sghmc", "sgld", "svi"]
