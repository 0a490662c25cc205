"""Backends: one folder per PPL (``numpyro/``, ``pyro/``), holding its ops and its drivers only.

What a backend must provide and how it is found live one layer down, in :mod:`ppl_bnn.engine`
(:class:`~ppl_bnn.engine.contracts.Backend`, :mod:`ppl_bnn.engine.registry`).
"""
