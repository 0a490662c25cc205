"""NumPyro (JAX) backend: ``ops`` (the model program and array operations), the drivers
``autoguide`` (SVI), ``meanfield`` (the mean-field estimators), ``hmc`` (NUTS/HMC), ``mclmc``,
``mams`` and ``sgmcmc`` (SG-MCMC under ``lax.scan``), and the modules ``linearised``,
``jacobian``, ``device``, ``runtime`` and ``perf``. Importing this package imports no JAX: only
:data:`BACKEND`."""

from ppl_bnn.engine.registry import BackendDeclaration, OwnOption

BACKEND = BackendDeclaration(
    name="numpyro",
    title="NumPyro",
    framework="JAX",
    drivers=("autoguide", "meanfield", "hmc", "mclmc", "mams", "sgmcmc"),
    modules=("linearised", "jacobian", "device", "runtime", "perf"),
    packages=("numpyro", "blackjax", "jax", "jaxlib"),
    parallel_chains=True,
    xla=True,
    own_options=(OwnOption("init"), OwnOption("chain_method")),
)
