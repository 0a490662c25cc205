"""XLA's optimisation levels (:func:`ppl_bnn.configure_runtime`'s ``xla_optimisation``), for the
backends whose programs XLA compiles (:attr:`~ppl_bnn.engine.registry.BackendDeclaration.xla`):
the names, the ``$XLA_FLAGS`` each sets, and the flags of this process that set it."""

from __future__ import annotations

import os

#: How hard XLA's CPU compiler optimises the programs JAX compiles
#: (:func:`~ppl_bnn.configure_runtime`'s ``xla_optimisation``): ``"full"``, XLA's defaults;
#: ``"low"``, LLVM at its level 1 and XLA's older CPU emitters, which compile faster and run slower
#: (``python benchmarks/sweep_flags.py`` measures both); the last bits of what a program
#: computes may differ between them.
XLA_OPTIMISATION = ("full", "low")
#: The ``$XLA_FLAGS`` of each level: ``"full"`` adds none.
XLA_OPTIMISATION_FLAGS: dict[str, tuple[str, ...]] = {
    "full": (),
    "low": ("--xla_backend_optimization_level=1", "--xla_cpu_use_fusion_emitters=false"),
}
#: The names of the flags the levels set (a level replaces the values ``$XLA_FLAGS`` gave them).
XLA_OPTIMISATION_FLAG_NAMES = (
    "--xla_backend_optimization_level=",
    "--xla_cpu_use_fusion_emitters=",
)


def check_xla_optimisation(level: object) -> str:
    """``level``, one of :data:`XLA_OPTIMISATION`; else ``ValueError`` naming the levels."""
    if level not in XLA_OPTIMISATION:
        levels = ", ".join(map(repr, XLA_OPTIMISATION))
        raise ValueError(f"xla_optimisation must be one of {levels}, got {level!r}")
    return level


def xla_optimisation_flags() -> tuple[str, ...]:
    """The flags of ``$XLA_FLAGS`` that set how hard XLA optimises (whatever set them: a level,
    or the variable given by hand), sorted: they may change the last bits of what a compiled
    program computes, so what keeps computed results apart keys on them."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    return tuple(sorted(f for f in flags if f.startswith(XLA_OPTIMISATION_FLAG_NAMES)))
