"""NumPyro (JAX) backend: ``ops`` (the model program and array operations) and the drivers
``autoguide`` (SVI), ``hmc`` (NUTS/HMC) and ``sgmcmc`` (SG-MCMC under ``lax.scan``)."""
