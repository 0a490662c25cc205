"""The model: a backend-neutral spec (layers, priors, likelihood), the one model program written
against a PPL namespace, validation, and :class:`BNN`, the spec bound to its training data.

Nothing here imports torch or jax.
"""
