"""Backends: one folder per PPL (``numpyro/``, ``pyro/``), holding its ops and its drivers only.

What a backend must provide and how it is found live one layer down, in :mod:`ppl_bnn.engine`
(:class:`~ppl_bnn.engine.contracts.Backend`, :mod:`ppl_bnn.engine.registry`).
"""

import warnings

# NumPyro and Pyro import tqdm.auto, which warns "IProgress not found" in a notebook without
# ipywidgets. ppl_bnn draws its own progress (bench/progress.py), so tqdm.auto is imported here,
# before either backend, without that warning.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="IProgress not found")
    import tqdm.auto  # noqa: F401
