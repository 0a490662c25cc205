"""Convolution and pooling of channels-last images in JAX, batched over draws.

Images are (*B, N, H, W, C) and filters (*B, kh, kw, C, O) (HWIO), as in
:mod:`ppl_bnn.model.layers`. A convolution is one ``lax.conv_general_dilated`` with NHWC / HWIO
dimension numbers; draws of the filters are mapped with ``jax.vmap``, which XLA lowers to one
grouped convolution (draws folded into the feature groups).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

_DIMENSIONS = ("NHWC", "HWIO", "NHWC")


def _conv(x: jax.Array, w: jax.Array, stride: tuple[int, int], padding: Any) -> jax.Array:
    """One filter bank ``w`` (kh, kw, C, O) over images ``x`` (N, H, W, C)."""
    return lax.conv_general_dilated(
        x, w, window_strides=stride, padding=padding, dimension_numbers=_DIMENSIONS
    )


def conv2d(
    x: jax.Array,
    w: jax.Array,
    stride: tuple[int, int],
    padding: tuple[tuple[int, int], tuple[int, int]],
) -> jax.Array:
    """Cross-correlation of ``x`` (*Bx, N, H, W, C) with ``w`` (*Bw, kh, kw, C, O), zero
    ``padding`` ((top, bottom), (left, right)); batch axes broadcast: (*B, N, H', W', O)."""
    fn = partial(_conv, stride=tuple(stride), padding=tuple(tuple(p) for p in padding))
    x_batch, w_batch = x.shape[:-4], w.shape[:-4]
    if not w_batch:  # one filter bank: every leading axis of x is more images
        y = fn(x.reshape((-1, *x.shape[-3:])), w)
        return y.reshape((*x_batch, x.shape[-4], *y.shape[-3:]))
    batch = jnp.broadcast_shapes(x_batch, w_batch)
    w = jnp.broadcast_to(w, (*batch, *w.shape[-4:])).reshape((-1, *w.shape[-4:]))
    if not x_batch:  # the same images under every draw
        y = jax.vmap(fn, in_axes=(None, 0))(x, w)
    else:
        x = jnp.broadcast_to(x, (*batch, *x.shape[-4:])).reshape((-1, *x.shape[-4:]))
        y = jax.vmap(fn)(x, w)
    return y.reshape((*batch, *y.shape[1:]))


def pool(x: jax.Array, reduce: str, size: tuple[int, int]) -> jax.Array:
    """``"max"`` or ``"avg"`` over non-overlapping ``size`` windows of ``x`` (..., H, W, C),
    by ``lax.reduce_window`` with 'VALID' padding (leftover rows and columns dropped)."""
    images = x.reshape((-1, *x.shape[-3:]))
    window = (1, *size, 1)
    if reduce == "max":
        y = lax.reduce_window(images, -jnp.inf, lax.max, window, window, "VALID")
    elif reduce == "avg":
        y = lax.reduce_window(images, 0.0, lax.add, window, window, "VALID") / (size[0] * size[1])
    else:
        raise ValueError(f"unknown pooling {reduce!r}; allowed: max, avg")
    return y.reshape((*x.shape[:-3], *y.shape[-3:]))
