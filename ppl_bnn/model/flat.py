"""One flat vector for all of a model's sites, and back.

Samplers that work on a single array (Pyro's kernels on a flat potential, the performance
probes) lay the unconstrained sites end to end in :meth:`BNNSpec.sites` order. The same slicing
code serves numpy arrays and torch tensors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from ppl_bnn.model.spec import BNNSpec


@dataclass(frozen=True)
class FlatLayout:
    """Where each site sits in the flat vector.

    Attributes:
        names: Site names, in the spec's order.
        shapes: Shape of one draw of each site.
    """

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, spec: BNNSpec) -> FlatLayout:
        sites = spec.sites()
        return cls(tuple(s.name for s in sites), tuple(tuple(s.shape) for s in sites))

    @property
    def size(self) -> int:
        """Length of the flat vector."""
        return sum(prod(shape) for shape in self.shapes)

    def unflatten(self, z: Any) -> dict[str, Any]:
        """``z`` shaped (..., size), numpy or torch, as ``{site: (..., *shape)}`` views."""
        out, start = {}, 0
        batch = tuple(z.shape[:-1])
        for name, shape in zip(self.names, self.shapes, strict=True):
            size = prod(shape)
            out[name] = z[..., start : start + size].reshape(batch + shape)
            start += size
        return out

    def flatten(self, params: Mapping[str, np.ndarray]) -> np.ndarray:
        """Sites shaped (..., *shape) as one float32 array (..., size)."""
        parts = []
        for name, shape in zip(self.names, self.shapes, strict=True):
            value = np.asarray(params[name], dtype=np.float32)
            batch = value.shape[: value.ndim - len(shape)]
            parts.append(value.reshape(*batch, prod(shape)))
        return np.concatenate(parts, axis=-1)


def sites_layout(spec: BNNSpec, names: Sequence[str]) -> FlatLayout:
    """The layout of the sites ``names`` laid end to end, in that order."""
    shapes = {s.name: tuple(s.shape) for s in spec.sites()}
    return FlatLayout(tuple(names), tuple(shapes[name] for name in names))


def split_network(
    spec: BNNSpec, params: Mapping[str, np.ndarray], wrt: Sequence[str]
) -> tuple[FlatLayout, np.ndarray, dict[str, np.ndarray]]:
    """``(layout, flat, fixed)``: the sites ``wrt`` of one parameter set as one float32 vector
    with its layout, and the other network sites' values (float32), which a function of the
    ``wrt`` sites alone holds fixed (a Jacobian with respect to some layers)."""
    layout = sites_layout(spec, wrt)
    fixed = {
        name: np.asarray(value, dtype=np.float32)
        for name, value in params.items()
        if name not in layout.names and name in network_sites(spec)
    }
    return layout, layout.flatten(params), fixed


def network_sites(spec: BNNSpec) -> tuple[str, ...]:
    """The sites of the network's weights and biases (every site but the noise precision), in
    :meth:`BNNSpec.sites` order."""
    return tuple(name for _, sites in spec.layer_params for name in sites.values())
