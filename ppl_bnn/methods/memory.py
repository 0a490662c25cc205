"""What a fit needs in memory at the least, checked before it starts.

A network too large for the machine would otherwise fail deep inside XLA or torch, after minutes
of compiling and fitting, with an allocation error that names neither the network nor the
option to change. :func:`check_memory` refuses it up front from a lower bound that every fit
of the method certainly allocates:

- the draws the result holds: ``kept_draws`` x P float32 weights (P: the network's weights);
- the weights and their gradient while fitting: 2 P float32;
- the largest matrix the method holds beyond its draws (a full-rank guide's Cholesky factor, a
  dense mass matrix, SWAG's deviations; ``options.matrix_floats(P)`` float32);
- the pointwise training log-likelihood: ``kept_draws`` x N float64, and the network's outputs
  behind it, ``kept_draws`` x N x outputs float32.

What the libraries allocate on top (optimiser moments, activations, compiled programs) is not
counted, so a fit refused here could never have run, and one let through may still run out.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from ppl_bnn.model.spec import BNNSpec

logger = logging.getLogger(__name__)

FLOAT32 = 4
FLOAT64 = 8

_MEMINFO = Path("/proc/meminfo")
_CGROUP = Path("/sys/fs/cgroup")


class InsufficientMemoryError(MemoryError):
    """A fit needs more memory than the machine has available: raised before it starts."""


def required_bytes(spec: BNNSpec, options: Any, num_data: int) -> dict[str, int]:
    """The lower bound of the module docstring, by what holds it (bytes)."""
    weights = sum(site.size for site in spec.sites())
    draws = options.kept_draws
    outputs = spec.num_classes or 1
    return {
        f"{draws:,} draw{'s' * (draws != 1)} of {weights:,} weights": draws * weights * FLOAT32,
        "the weights and their gradient": 2 * weights * FLOAT32,
        "the method's covariance or mass matrix": options.matrix_floats(weights) * FLOAT32,
        f"the training predictions ({draws:,} draws x {num_data:,} points)": draws
        * num_data
        * (FLOAT64 + outputs * FLOAT32),
    }


def available_bytes() -> int | None:
    """Memory this process may still take: the kernel's ``MemAvailable``, capped by the
    cgroup's limit less its usage where one is set; None where neither can be read."""
    known = []
    try:
        for line in _MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                known.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = (_CGROUP / "memory.max").read_text().strip()
        if limit != "max":
            used = int((_CGROUP / "memory.current").read_text())
            known.append(max(0, int(limit) - used))
    except (OSError, ValueError):
        pass
    return min(known) if known else None


def check_memory(method: str, spec: BNNSpec, options: Any, num_data: int) -> None:
    """``InsufficientMemoryError`` when ``fit(model, method)`` needs more than is available.

    The message leads with the cause: what the fit needs at least, by part, against what is
    available, and what to change.
    """
    available = available_bytes()
    if available is None:
        logger.debug("available memory unknown: no check before fitting %s", method)
        return
    parts = required_bytes(spec, options, num_data)
    needed = sum(parts.values())
    if needed <= available:
        return
    largest = sorted(((b, what) for what, b in parts.items() if b), reverse=True)
    detail = "; ".join(f"{what}: {_size(b)}" for b, what in largest)
    raise InsufficientMemoryError(
        f"not enough memory for {method!r} on this network: it needs at least {_size(needed)} "
        f"({detail}), and {_size(available)} is available. Take fewer draws, or use a smaller "
        "network or method"
    )


def _size(num_bytes: int) -> str:
    """``num_bytes`` in the largest binary unit that keeps it at least 1 (``1.5 GiB``)."""
    units = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB")
    power = min(len(units) - 1, int(math.log(max(num_bytes, 1), 1024)))
    if power == 0:
        return f"{num_bytes} bytes"
    return f"{num_bytes / 1024**power:.1f} {units[power]}"
