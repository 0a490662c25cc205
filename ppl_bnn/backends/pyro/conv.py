"""Convolution and pooling of channels-last images in torch, batched over draws.

Images are (*B, N, H, W, C) and filters (*B, kh, kw, C, O) (HWIO), as in
:mod:`ppl_bnn.model.layers`; torch's kernels take NCHW images and OIHW filters, so both are
transposed here. S draws of the filters run as one convolution: with the same images under every
draw, the draws' filters are stacked as S O output channels; with images per draw, the draws are
S groups (``groups=S``) of C input and O output channels each.
"""

from __future__ import annotations

from math import prod

import torch
import torch.nn.functional as F


def _nchw(x: torch.Tensor) -> torch.Tensor:
    return x.permute(0, 3, 1, 2)


def _padded_conv(
    images: torch.Tensor,
    filters: torch.Tensor,
    pad: tuple[int, int, int, int],
    stride: tuple[int, ...],
    groups: int = 1,
) -> torch.Tensor:
    """``F.conv2d`` of NCHW ``images`` zero-padded by ``pad`` (left, right, top, bottom): by the
    kernel's own padding when it is symmetric (no padded copy of the images), else ``F.pad``."""
    left, right, top, bottom = pad
    if left == right and top == bottom:
        return F.conv2d(images, filters, stride=stride, padding=(top, left), groups=groups)
    return F.conv2d(F.pad(images, pad), filters, stride=stride, groups=groups)


def conv2d(
    x: torch.Tensor,
    w: torch.Tensor,
    stride: tuple[int, int],
    padding: tuple[tuple[int, int], tuple[int, int]],
) -> torch.Tensor:
    """Cross-correlation of ``x`` (*Bx, N, H, W, C) with ``w`` (*Bw, kh, kw, C, O), zero
    ``padding`` ((top, bottom), (left, right)); batch axes broadcast: (*B, N, H', W', O)."""
    (top, bottom), (left, right) = padding
    pad = (left, right, top, bottom)  # F.pad: last axis (W) first
    stride = tuple(stride)
    x_batch, w_batch = tuple(x.shape[:-4]), tuple(w.shape[:-4])
    n, height, width, channels = x.shape[-4:]
    kh, kw, _, out = w.shape[-4:]
    if not w_batch:  # one filter bank: every leading axis of x is more images
        images = _nchw(x.reshape(-1, height, width, channels))
        y = _padded_conv(images, w.permute(3, 2, 0, 1), pad, stride)
        return y.permute(0, 2, 3, 1).reshape(*x_batch, n, *y.shape[-2:], out)
    batch = torch.broadcast_shapes(x_batch, w_batch)
    draws = prod(batch)
    # (S, kh, kw, C, O) -> (S O, C, kh, kw): draw s's filters are output channels s O .. s O + O.
    filters = w.expand(*batch, kh, kw, channels, out).reshape(draws, kh, kw, channels, out)
    filters = filters.permute(0, 4, 3, 1, 2).reshape(draws * out, channels, kh, kw)
    if not x_batch:  # the same images under every draw
        y = _padded_conv(_nchw(x), filters, pad, stride)
    else:  # (S, N, H, W, C) -> (N, S C, H, W): draw s's images are input group s
        images = x.expand(*batch, n, height, width, channels).reshape(
            draws, n, height, width, channels
        )
        images = images.permute(1, 0, 4, 2, 3).reshape(n, draws * channels, height, width)
        y = _padded_conv(images, filters, pad, stride, groups=draws)
    rows, cols = y.shape[-2:]
    y = y.reshape(n, draws, out, rows, cols).permute(1, 0, 3, 4, 2)
    return y.reshape(*batch, n, rows, cols, out)


def pool(x: torch.Tensor, reduce: str, size: tuple[int, int]) -> torch.Tensor:
    """``"max"`` or ``"avg"`` over non-overlapping ``size`` windows of ``x`` (..., H, W, C),
    by ``max_pool2d`` / ``avg_pool2d`` with stride = size (leftover rows and columns dropped)."""
    if reduce == "max":
        fn = F.max_pool2d
    elif reduce == "avg":
        fn = F.avg_pool2d
    else:
        raise ValueError(f"unknown pooling {reduce!r}; allowed: max, avg")
    height, width, channels = x.shape[-3:]
    y = fn(_nchw(x.reshape(-1, height, width, channels)), kernel_size=size, stride=size)
    return y.permute(0, 2, 3, 1).reshape(*x.shape[:-3], *y.shape[-2:], channels)
