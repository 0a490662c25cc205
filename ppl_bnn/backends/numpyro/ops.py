"""NumPyro (JAX) backend: the BNN program with ``numpyro`` primitives and jitted array ops."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache, partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions
import numpyro.handlers
from numpyro.infer.util import log_density as _numpyro_log_density

from ppl_bnn.backends.numpyro import conv
from ppl_bnn.backends.numpyro.compile_cache import FitCompilations, enable_jax_cache
from ppl_bnn.engine.contracts import draws_per_batch
from ppl_bnn.model.dropout import Dropout
from ppl_bnn.model.program import PPL, bnn_model, forward, model_numbers, numberless
from ppl_bnn.model.spec import BNNSpec

name = "numpyro"

# The backend's first use: JAX's persistent compilation cache on before any of its programs
# compile (every NumPyro fit applies the current setting again).
enable_jax_cache()


def _param(name: str, init: float, constraint: Any) -> Any:
    """``numpyro.param`` with a number as its initial value (a float32 array)."""
    return numpyro.param(name, jnp.asarray(init, dtype=jnp.float32), constraint=constraint)


def _draw(distribution: Any, shape: Any) -> jax.Array:
    """A draw of ``shape`` with a key from the enclosing seed handler (``numpyro.prng_key``),
    as SVI seeds the model at every step."""
    key = numpyro.prng_key()
    if key is None:
        raise ValueError("a random draw inside the model needs it seeded (numpyro.handlers.seed)")
    if distribution.has_rsample:
        return distribution.rsample(key, tuple(shape))
    return distribution.sample(key, tuple(shape))


PPL_NUMPYRO = PPL(
    name=name,
    sample=numpyro.sample,
    plate=numpyro.plate,
    param=_param,
    scale=numpyro.handlers.scale,
    dist=numpyro.distributions,
    biject_to=numpyro.distributions.transforms.biject_to,
    activations={
        "relu": jax.nn.relu,
        "tanh": jnp.tanh,
        "gelu": partial(jax.nn.gelu, approximate=False),
        "sigmoid": jax.nn.sigmoid,
    },
    conv2d=conv.conv2d,
    pool=conv.pool,
    draw=_draw,
    factor=numpyro.factor,
    stack=lambda values: jnp.stack([jnp.asarray(v, dtype=jnp.result_type(float)) for v in values]),
)
#: This backend's PPL, as the contract names it (:class:`~ppl_bnn.engine.contracts.Backend`).
ppl = PPL_NUMPYRO


@contextlib.contextmanager
def no_valid_start_as(error: Callable[[], Exception]) -> Iterator[None]:
    """Raise ``error()`` in place of NumPyro's error for a model whose log density is not finite
    at any starting point tried ("Cannot find valid initial parameters", from ``MCMC`` and from
    an autoguide's initialisation)."""
    try:
        yield
    except RuntimeError as err:
        if "Cannot find valid initial parameters" not in str(err):
            raise
        raise error() from err


def fit_compilations() -> FitCompilations:
    """JAX's persistent compilation cache on before anything compiles, and its hits counted."""
    return FitCompilations()


def model(spec: BNNSpec, dropout: Dropout | None = None) -> Any:
    if dropout is None:
        return partial(bnn_model, spec, PPL_NUMPYRO)
    return partial(bnn_model, spec, PPL_NUMPYRO, network=dropout.network(spec, PPL_NUMPYRO))


def data(spec: BNNSpec, x: np.ndarray, y: np.ndarray | None) -> tuple[Any, Any]:
    x_arr = jnp.asarray(x, dtype=jnp.float32)
    if y is None:
        return x_arr, None
    dtype = jnp.float32 if spec.likelihood == "gaussian" else jnp.int32
    return x_arr, jnp.asarray(y, dtype=dtype)


def numbers(spec: BNNSpec, variant: Any = None) -> dict[str, jax.Array]:
    """The model's numbers (:func:`~ppl_bnn.model.program.model_numbers`, and those of a
    ``variant`` such as MC dropout's :class:`~ppl_bnn.model.dropout.Dropout`) as float arrays:
    the arguments of programs kept under the spec without them."""
    given = {**model_numbers(spec), **(variant.numbers() if variant is not None else {})}
    return {k: jnp.asarray(v, dtype=jnp.result_type(float)) for k, v in given.items()}


def _as_params(params: Mapping[str, np.ndarray]) -> dict[str, jax.Array]:
    return {k: jnp.asarray(v, dtype=jnp.float32) for k, v in params.items()}


def log_joint(spec: BNNSpec) -> Any:
    """Pure JAX function ``(params, x, y, likelihood_scale, numbers) -> log joint`` of the model
    (``numbers``: the model's, :func:`~ppl_bnn.model.program.model_numbers`, as arguments of a
    compiled program, or None for the spec's own)."""

    def fn(params, x, y, likelihood_scale=1.0, numbers=None):
        kwargs = {"likelihood_scale": likelihood_scale, "numbers": numbers}
        return _numpyro_log_density(model(spec), (x, y), kwargs, params)[0]

    return fn


@lru_cache(maxsize=32)
def _log_density_fn(spec: BNNSpec):
    fn = log_joint(spec)
    return jax.jit(fn), jax.jit(jax.grad(fn))


def log_density(
    spec: BNNSpec, x: Any, y: Any, params: Mapping[str, np.ndarray], likelihood_scale: float = 1.0
) -> float:
    return float(_log_density_fn(spec)[0](_as_params(params), x, y, likelihood_scale))


def grad_log_density(
    spec: BNNSpec, x: Any, y: Any, params: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    grads = _log_density_fn(spec)[1](_as_params(params), x, y)
    return {k: np.asarray(v) for k, v in grads.items()}


@lru_cache(maxsize=32)
def _forward_fn(spec: BNNSpec, batch: int, devices: int):
    one_draw = partial(forward, spec, ppl=PPL_NUMPYRO)

    def over_draws(params, x):
        return jax.lax.map(lambda p: one_draw(p, x), params, batch_size=batch)

    if devices == 1:
        return jax.jit(over_draws)
    return jax.pmap(over_draws, in_axes=(0, None))


def forward_draws(spec: BNNSpec, params: Mapping[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Draws split evenly over JAX's host devices (one share per device, run in parallel; the
    last draw repeated to fill the last share), each share a few draws at a time."""
    num = next(iter(params.values())).shape[0]
    devices = max(1, min(jax.local_device_count(), num))
    fn = _forward_fn(numberless(spec), draws_per_batch(spec, x.shape[0]), devices)
    x_arr = jnp.asarray(x, dtype=jnp.float32)
    if devices == 1:
        return np.asarray(fn(_as_params(params), x_arr))
    share = -(-num // devices)
    pad = devices * share - num

    def split(v: np.ndarray) -> np.ndarray:
        v = np.asarray(v, dtype=np.float32)
        if pad:
            v = np.concatenate([v, np.repeat(v[-1:], pad, axis=0)])
        return v.reshape(devices, share, *v.shape[1:])

    f = np.asarray(fn({k: split(v) for k, v in params.items()}, x_arr))
    return f.reshape(devices * share, *f.shape[2:])[:num]
