"""``BNN``: a :class:`~ppl_bnn.spec.BNNSpec` bound to validated training data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from ppl_bnn.backends import get_backend
from ppl_bnn.seeding import numpy_generator
from ppl_bnn.spec import BNNSpec

#: Largest number of classes inferred from labels (a guard against mistaken float targets).
MAX_CLASSES = 100_000


def validate_inputs(x: object, input_dim: int | None = None, name: str = "x") -> np.ndarray:
    """``x`` as a finite float32 array of shape (N, D); ``ValueError`` naming the problem."""
    arr = np.asarray(x)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise ValueError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional (N, D), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} has no rows")
    if input_dim is not None and arr.shape[1] != input_dim:
        raise ValueError(
            f"{name} has {arr.shape[1]} features but the model was built with {input_dim}"
        )
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        raise ValueError(
            f"{name} contains non-finite values (NaN or inf) in {int(np.sum(~finite))} row(s)"
        )
    _check_float32_range(arr, name)
    return arr.astype(np.float32)


def _check_float32_range(arr: np.ndarray, name: str) -> None:
    limit = np.finfo(np.float32).max
    if arr.size and np.max(np.abs(arr)) > limit:
        raise ValueError(f"{name} has values beyond the float32 range (|value| > {limit:.3g})")


def validate_targets(
    y: object, n: int, likelihood: str, num_classes: int | None = None, name: str = "y"
) -> np.ndarray:
    """``y`` as float32 (regression) or int64 labels 0..K-1 (classification), length ``n``."""
    arr = np.asarray(y)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise ValueError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional (N,), got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries but x has {n} rows")
    if likelihood == "gaussian":
        if not np.all(np.isfinite(arr)):
            raise ValueError(
                f"{name} contains {int(np.sum(~np.isfinite(arr)))} non-finite value(s)"
            )
        _check_float32_range(arr, name)
        return arr.astype(np.float32)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite labels")
    if not np.issubdtype(arr.dtype, np.integer) and np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must hold integer class labels 0..K-1, found non-integers")
    # Range checks on the original values, before any cast can overflow.
    if arr.min() < 0:
        raise ValueError(f"{name} must hold class labels 0..K-1, found {arr.min()}")
    upper = num_classes if num_classes is not None else MAX_CLASSES
    if arr.max() >= upper:
        raise ValueError(
            f"{name} has label {arr.max()} but the model allows classes 0..{upper - 1}"
        )
    return arr.astype(np.int64)


class BNN:
    """A Bayesian MLP: the spec plus its training data.

    Args:
        x: Inputs, shape (N, D), finite.
        y: Targets, shape (N,): floats for ``likelihood="gaussian"``, integer labels 0..K-1 for
            ``"categorical"`` (K is ``num_classes`` or, by default, ``max(y) + 1``).
        hidden, activation, prior_scale, fan_in_scaling, likelihood, noise: see
            :class:`~ppl_bnn.spec.BNNSpec`.
        num_classes: Number of classes for the categorical likelihood.

    Example:
        >>> import numpy as np
        >>> from ppl_bnn import BNN
        >>> x = np.linspace(-1, 1, 20)[:, None]
        >>> model = BNN(x, np.sin(3 * x[:, 0]), hidden=(10,), noise=0.1)
        >>> sorted(model.init_params(seed=0))
        ['b0', 'b1', 'w0', 'w1']
    """

    def __init__(
        self,
        x: object,
        y: object,
        *,
        hidden: Sequence[int] = (50,),
        activation: str = "tanh",
        prior_scale: float | Sequence[float] = 1.0,
        fan_in_scaling: bool = False,
        likelihood: Literal["gaussian", "categorical"] = "gaussian",
        noise: float | Literal["learned"] | None = None,
        num_classes: int | None = None,
    ) -> None:
        x_arr = validate_inputs(x)
        y_arr = validate_targets(y, x_arr.shape[0], likelihood, num_classes)
        if likelihood == "categorical" and num_classes is None:
            num_classes = int(y_arr.max()) + 1
        if likelihood == "gaussian" and noise is None:
            raise ValueError("gaussian likelihood needs noise: a known std > 0 or 'learned'")
        self.spec = BNNSpec(
            input_dim=x_arr.shape[1],
            hidden=tuple(hidden) if isinstance(hidden, Sequence) else hidden,
            activation=activation,
            prior_scale=tuple(prior_scale) if isinstance(prior_scale, Sequence) else prior_scale,
            fan_in_scaling=fan_in_scaling,
            likelihood=likelihood,
            noise=noise,
            num_classes=num_classes,
        )
        self.x = x_arr
        self.y = y_arr

    @classmethod
    def from_spec(cls, spec: BNNSpec, x: object, y: object) -> BNN:
        """Bind an existing spec to data."""
        return cls(
            x,
            y,
            hidden=spec.hidden,
            activation=spec.activation,
            prior_scale=spec.prior_scale,
            fan_in_scaling=spec.fan_in_scaling,
            likelihood=spec.likelihood,
            noise=spec.noise,
            num_classes=spec.num_classes,
        )

    @property
    def num_data(self) -> int:
        return int(self.x.shape[0])

    def __repr__(self) -> str:
        return f"BNN(n={self.num_data}, spec={self.spec!r})"

    def init_params(self, seed: int) -> dict[str, np.ndarray]:
        """One draw from the prior, as float32 numpy arrays keyed by site name."""
        rng = numpy_generator(seed, "init_params")
        params: dict[str, np.ndarray] = {}
        for site in self.spec.sites():
            kind, value = site.prior
            if kind == "normal":
                draw = rng.normal(0.0, value, size=site.shape)
            else:
                concentration, rate = value
                draw = rng.gamma(concentration, 1.0 / rate, size=site.shape)
            params[site.name] = np.asarray(draw, dtype=np.float32)
        return params

    def check_params(self, params: Mapping[str, object]) -> dict[str, np.ndarray]:
        """``params`` validated against the spec's sites (names, shapes, finiteness, support)."""
        sites = {s.name: s for s in self.spec.sites()}
        missing = sorted(set(sites) - set(params))
        extra = sorted(set(params) - set(sites))
        if missing or extra:
            raise ValueError(
                f"params must have exactly the sites {sorted(sites)}; "
                f"missing {missing}, unexpected {extra}"
            )
        out = {}
        for name, site in sites.items():
            arr = np.asarray(params[name], dtype=np.float32)
            if arr.shape != site.shape:
                raise ValueError(f"params[{name!r}] has shape {arr.shape}, expected {site.shape}")
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"params[{name!r}] contains non-finite values")
            if site.positive and np.any(arr <= 0):
                raise ValueError(f"params[{name!r}] must be > 0")
            out[name] = arr
        return out

    def log_density(self, params: Mapping[str, object], backend: str = "numpyro") -> float:
        """Log joint ``log p(theta) + sum_i log p(y_i | x_i, theta)``, by ``backend``'s model."""
        impl = get_backend(backend)
        checked = self.check_params(params)
        x, y = impl.data(self.spec, self.x, self.y)
        return impl.log_density(self.spec, x, y, checked)

    def grad_log_density(
        self, params: Mapping[str, object], backend: str = "numpyro"
    ) -> dict[str, np.ndarray]:
        """Gradient of :meth:`log_density` with respect to every site."""
        impl = get_backend(backend)
        checked = self.check_params(params)
        x, y = impl.data(self.spec, self.x, self.y)
        return impl.grad_log_density(self.spec, x, y, checked)
