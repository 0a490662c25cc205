"""Pyro (torch) backend: ``ops`` (the model program and array operations), ``potential`` (the
flat, compiled potential), ``rng`` (seeded torch, scoped param store) and the drivers
``autoguide`` (SVI), ``hmc`` (NUTS/HMC) and ``sgmcmc`` (SG-MCMC in a torch loop)."""
