"""Pyro (torch) backend: ``ops`` (the model program and array operations), ``potential`` (the
flat, compiled potential), ``rng`` (seeded torch, scoped param store), the drivers
``autoguide`` (SVI), ``meanfield`` (the mean-field estimators), ``hmc`` (NUTS/HMC) and
``sgmcmc`` (SG-MCMC in a torch loop), and the modules ``linearised``, ``jacobian``,
``device``, ``runtime`` and ``perf``. Importing this package imports no torch: only
:data:`BACKEND` and the values of its own options."""

from typing import Any

from ppl_bnn.engine.registry import BackendDeclaration, OwnOption

#: The flat-vector potentials (:mod:`.potential`): compiled, traced or eager.
FLAT_POTENTIALS: tuple[str, ...] = ("compiled", "traced", "eager")
#: How NUTS/HMC evaluate the potential: a flat-vector one, or Pyro's own per-site potential with
#: and without ``jit_compile``.
POTENTIALS: tuple[str, ...] = (*FLAT_POTENTIALS, "pyro_jit", "pyro")
#: How SVI updates the guide: one fused torch Adam, or Pyro's ``SVI.step``.
UPDATES: tuple[str, ...] = ("fused", "pyro")


def check_options(options: Any) -> None:
    """Pyro's ``SVI.step`` fits the reparameterised ELBO only: the other estimators have their
    own loop (the ``meanfield`` driver)."""
    estimator = getattr(options, "estimator", "reparam")
    if estimator != "reparam" and getattr(options, "update", None) == "pyro":
        raise ValueError(
            f"estimator {estimator!r} is fitted by its own loop with one fused torch Adam, not "
            "by Pyro's SVI.step: drop update='pyro'"
        )


BACKEND = BackendDeclaration(
    name="pyro",
    title="Pyro",
    framework="torch",
    drivers=("autoguide", "meanfield", "hmc", "sgmcmc"),
    modules=("linearised", "jacobian", "device", "runtime", "perf"),
    packages=("torch", "pyro-ppl"),
    own_options=(
        OwnOption("potential", POTENTIALS),
        OwnOption("update", UPDATES),
        OwnOption("jit"),
    ),
    check_options=check_options,
)
