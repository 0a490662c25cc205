"""Pyro (torch) backend: ``ops`` (the model program and array operations), ``potential`` (the
flat, compiled potential), ``rng`` (seeded torch, scoped param store), the drivers
``autoguide`` (SVI), ``meanfield`` (the mean-field estimators), ``hmc`` (NUTS/HMC) and
``sgmcmc`` (SG-MCMC in a torch loop), and the modules ``linearised``, ``jacobian`` and
``device``. Importing this package imports no torch: only :data:`BACKEND`."""

from ppl_bnn.engine.registry import BackendDeclaration

BACKEND = BackendDeclaration(
    name="pyro",
    framework="torch",
    drivers=("autoguide", "meanfield", "hmc", "sgmcmc"),
    modules=("linearised", "jacobian", "device", "runtime"),
    packages=("torch", "pyro-ppl"),
)
