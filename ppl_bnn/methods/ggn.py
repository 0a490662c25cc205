r"""The generalised Gauss-Newton (GGN) curvature at a mode and the Laplace marginal likelihood.

At weights :math:`\theta_*` (a MAP fit), with :math:`J_n = \partial f(x_n) / \partial \theta`
(outputs x P, from the backend's ``jacobian`` op, :mod:`ppl_bnn.backends.numpyro.jacobian`,
:mod:`ppl_bnn.backends.pyro.jacobian`), the GGN of the negative log-likelihood is

.. math:: G = \sum_n J_n^\top \Lambda_n J_n, \qquad
          \Lambda_n = \sigma^{-2} \ \text{(Gaussian)}, \qquad
          \Lambda_n = \mathrm{diag}(p_n) - p_n p_n^\top \ \text{(softmax, } p_n =
          \mathrm{softmax} f(x_n)\text{)},

positive semi-definite by construction (Martens 2014). With a Gaussian prior of precision
:math:`P_0 = \mathrm{diag}(\delta)` (one :math:`\delta` for all weights or one per layer) the
Laplace posterior is :math:`\mathcal N(\theta_*, H^{-1})`, :math:`H = G + P_0`, and the Laplace
approximation of the log marginal likelihood (MacKay 1992; Immer et al. 2021, eq. 5; the
``log_marginal_likelihood`` of ``laplace-torch``, Daxberger et al. 2021) is

.. math:: \log p(\mathcal D \mid \delta, \sigma) \approx \log p(\mathcal D \mid \theta_*, \sigma)
          - \tfrac12 \big(\log\det H - \log\det P_0\big) - \tfrac12\, \theta_*^\top P_0 \theta_*.

For a linear-Gaussian model it is the exact log evidence whenever :math:`\theta_*` is the
posterior mode under :math:`(\delta, \sigma)`.

:func:`curvature` accumulates :math:`G` batch by batch (never N x outputs x P at once), for a
Gaussian likelihood per unit noise precision, :math:`\sum_n J_n^\top J_n`, so that tuning
:math:`\sigma` rescales it. Structures: ``"full"`` (all network weights, P x P),
``"diag"`` (its diagonal, :math:`\sum_n \sum_{o,o'} J_{nop} \Lambda_{n,oo'} J_{no'p}`) and
``"last_layer"`` (the full GGN of the last parametrised layer's weights and bias, every other
weight fixed at the mode; Kristiadi et al. 2020). For a dense last layer with K > 1 outputs its
Jacobian is :math:`J_n = \tilde\phi_n^\top \otimes I_K` (:math:`\tilde\phi_n` the layer's
inputs, with a 1 for the bias), so :math:`G = \sum_n \tilde\phi_n \tilde\phi_n^\top \otimes
\Lambda_n`, built from the features in K times fewer operations than from :math:`J_n`; the
structure is read off and checked on each batch's Jacobian, and any other is summed in general.
:func:`tune` maximises the marginal likelihood over :math:`\log \delta` (and :math:`\log
\sigma` for a Gaussian with learned noise) post hoc, at fixed :math:`\theta_*`, by L-BFGS-B
with exact gradients: for one :math:`\delta` from one eigendecomposition of :math:`G`
(:math:`\log\det H = \sum_i \log(\lambda_i / \sigma^2 + \delta)`), per layer from a Cholesky
factor per evaluation.

References: D. J. C. MacKay. A Practical Bayesian Framework for Backpropagation Networks.
Neural Computation 1992. J. Martens. New insights and perspectives on the natural gradient
method. JMLR 2020 (arXiv 2014). A. Immer, M. Bauer, V. Fortuin, G. Rätsch, M. E. Khan.
Scalable Marginal Likelihood Estimation for Model Selection in Deep Learning. ICML 2021.
E. Daxberger, A. Kristiadi, A. Immer, R. Eschenhagen, M. Bauer, P. Hennig. Laplace Redux:
Effortless Bayesian Deep Learning. NeurIPS 2021. A. Kristiadi, M. Hein, P. Hennig. Being
Bayesian, Even Just a Bit, Fixes Overconfidence in ReLU Networks. ICML 2020.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.special

from ppl_bnn.engine.registry import get_module
from ppl_bnn.model.flat import FlatLayout, network_sites, sites_layout
from ppl_bnn.model.spec import BNNSpec

#: Curvature structures.
STRUCTURES: tuple[str, ...] = ("full", "diag", "last_layer")

#: The most weights a full GGN (P x P float64) is built for: 10,000 is 800 MB.
MAX_FULL_WEIGHTS = 10_000

#: Jacobian entries per batch of points (2**23: 32 MiB in float32, 64 MiB as float64).
_BATCH_FLOATS = 2**23

#: Points per update of a dense last layer's GGN from its features (:func:`curvature`): the
#: update writes the whole P x P matrix, so it is made for thousands of points at once.
_KRONECKER_ROWS = 4096

#: Bounds of the tuned :math:`\log \delta` and :math:`\log \sigma`.
_LOG_BOUNDS = (math.log(1e-8), math.log(1e8))


def laplace_sites(spec: BNNSpec, structure: str) -> tuple[str, ...]:
    """The sites the Gaussian covers: every network weight, or the last parametrised layer's."""
    if structure not in STRUCTURES:
        raise ValueError(f"unknown structure {structure!r}; available: {', '.join(STRUCTURES)}")
    if structure == "last_layer":
        last = [sites for _, sites in spec.layer_params if sites][-1]
        return tuple(last.values())
    return network_sites(spec)


def check_size(spec: BNNSpec, structure: str) -> None:
    """``ValueError`` when a full or last-layer GGN would exceed :data:`MAX_FULL_WEIGHTS`."""
    names = set(laplace_sites(spec, structure))
    size = sum(s.size for s in spec.sites() if s.name in names)
    if structure != "diag" and size > MAX_FULL_WEIGHTS:
        raise ValueError(
            f"structure={structure!r}: a GGN of {size} weights is a {size} x {size} matrix, "
            f"more than {MAX_FULL_WEIGHTS} weights: use structure='last_layer' or 'diag'"
        )


def layer_groups(spec: BNNSpec, names: tuple[str, ...]) -> np.ndarray:
    """Per weight of the flat vector of ``names``, the index of its parametrised layer,
    renumbered 0, 1, ... over the layers present."""
    layer_of: dict[str, int] = {}
    index = 0
    for _, sites in spec.layer_params:
        if sites:
            layer_of.update({name: index for name in sites.values()})
            index += 1
    sizes = {s.name: s.size for s in spec.sites()}
    raw = np.concatenate([np.full(sizes[n], layer_of[n]) for n in names])
    return np.unique(raw, return_inverse=True)[1]


def jacobian_op(backend: str) -> Any:
    """The backend's ``jacobian(spec, params, x, wrt) -> (f, J)``."""
    return get_module(backend, "jacobian").jacobian


@dataclass(frozen=True)
class Curvature:
    """The GGN at a mode and what the marginal likelihood needs of the data there.

    Attributes:
        likelihood: ``"gaussian"`` or ``"categorical"``.
        structure: One of :data:`STRUCTURES`.
        layout: The flat vector's sites and shapes.
        mean: :math:`\\theta_*` (P,), float64.
        groups: Layer index of each weight (P,), 0 to K - 1.
        ggn: :math:`G` (P, P), or its diagonal (P,) for ``"diag"``; per unit noise precision
            (:math:`\\sum_n J_n^\\top J_n`) for a Gaussian likelihood.
        num_data: N.
        sum_squares: Gaussian: :math:`\\sum_n (y_n - f_n)^2` at the mode; else NaN.
        log_lik: Categorical: :math:`\\sum_n \\log p(y_n \\mid f_n)` at the mode; else NaN.
    """

    likelihood: str
    structure: str
    layout: FlatLayout
    mean: np.ndarray
    groups: np.ndarray
    ggn: np.ndarray
    num_data: int
    sum_squares: float
    log_lik: float

    @property
    def num_groups(self) -> int:
        return int(self.groups.max()) + 1

    def log_likelihood(self, noise_std: float | None = None) -> float:
        """:math:`\\log p(\\mathcal D \\mid \\theta_*, \\sigma)`."""
        if self.likelihood == "categorical":
            return self.log_lik
        n = self.num_data
        return (
            -0.5 * n * math.log(2 * math.pi)
            - n * math.log(noise_std)
            - 0.5 * self.sum_squares / noise_std**2
        )

    def scaled_ggn(self, noise_std: float | None = None) -> np.ndarray:
        """:math:`G` itself (divided by :math:`\\sigma^2` for a Gaussian likelihood)."""
        if self.likelihood == "gaussian":
            return self.ggn / noise_std**2
        return self.ggn

    def precision(self, prior_precision: Any, noise_std: float | None = None) -> np.ndarray:
        """:math:`H = G + P_0`, (P, P) or its diagonal (P,); ``prior_precision`` one value
        or one per layer group."""
        delta = self.prior_diagonal(prior_precision)
        g = self.scaled_ggn(noise_std)
        if g.ndim == 1:
            return g + delta
        return g + np.diag(delta)

    def prior_diagonal(self, prior_precision: Any) -> np.ndarray:
        """:math:`\\mathrm{diag}(P_0)` (P,) from one value or one per layer group."""
        values = np.atleast_1d(np.asarray(prior_precision, dtype=np.float64)).ravel()
        if values.size == 1:
            values = np.full(self.num_groups, values[0])
        if values.size != self.num_groups:
            raise ValueError(f"{values.size} prior precisions given for {self.num_groups} layer(s)")
        return values[self.groups]

    def log_marginal_likelihood(
        self, prior_precision: Any, noise_std: float | None = None
    ) -> float:
        """The Laplace log marginal likelihood (module docstring) at ``prior_precision`` (one
        value or one per layer group) and ``noise_std``."""
        delta_w = self.prior_diagonal(prior_precision)
        delta = np.array([delta_w[self.groups == k][0] for k in range(self.num_groups)])
        s = 1.0 / noise_std**2 if self.likelihood == "gaussian" else 1.0
        return (
            self.log_likelihood(noise_std)
            - 0.5 * _whitened(self, delta, s)[0]
            - 0.5 * float(np.sum(delta_w * self.mean**2))
        )


def curvature(
    backend: str,
    spec: BNNSpec,
    params: Mapping[str, np.ndarray],
    x: np.ndarray,
    y: np.ndarray,
    structure: str = "full",
) -> Curvature:
    """The GGN of ``spec``'s log-likelihood at ``params`` (site -> one draw's value) on the
    data ``(x, y)``, accumulated over batches of points (module docstring)."""
    names = laplace_sites(spec, structure)
    check_size(spec, structure)
    layout = sites_layout(spec, names)
    size = layout.size
    op = jacobian_op(backend)
    network = {k: np.asarray(params[k], dtype=np.float32) for k in network_sites(spec)}
    n = len(x)
    batch = int(min(n, max(1, _BATCH_FLOATS // (spec.output_dim * size))))
    ggn = np.zeros(size if structure == "diag" else (size, size))
    sum_squares, log_lik = 0.0, 0.0
    # A dense last layer's features and outputs, summed in chunks of _KRONECKER_ROWS points.
    pending: list[tuple[np.ndarray, np.ndarray]] = []
    for start in range(0, n, batch):
        stop = min(start + batch, n)
        # Every batch the same size (the last padded by its last point), one compilation.
        index = np.minimum(np.arange(start, start + batch), n - 1)
        f, jac = op(spec, network, np.asarray(x)[index], names)
        f = np.asarray(f[: stop - start], dtype=np.float64)
        jac = np.asarray(jac[: stop - start], dtype=np.float64)
        features = _kronecker_features(jac) if structure == "last_layer" else None
        if features is not None and spec.likelihood == "categorical":
            pending.append((features, f))
            if sum(len(p[1]) for p in pending) >= _KRONECKER_ROWS:
                ggn += _flush_kronecker(pending)
        else:
            ggn += _ggn_batch(jac, f, spec.likelihood, diag=structure == "diag")
        if spec.likelihood == "gaussian":
            sum_squares += float(np.sum((np.asarray(y[start:stop], np.float64) - f[:, 0]) ** 2))
        else:
            logp = f - scipy.special.logsumexp(f, axis=1, keepdims=True)
            log_lik += float(np.sum(logp[np.arange(stop - start), np.asarray(y[start:stop])]))
    if pending:
        ggn += _flush_kronecker(pending)
    gaussian = spec.likelihood == "gaussian"
    return Curvature(
        likelihood=spec.likelihood,
        structure=structure,
        layout=layout,
        mean=layout.flatten(network).astype(np.float64),
        groups=layer_groups(spec, names),
        ggn=ggn,
        num_data=n,
        sum_squares=sum_squares if gaussian else math.nan,
        log_lik=math.nan if gaussian else log_lik,
    )


def _ggn_batch(jac: np.ndarray, f: np.ndarray, likelihood: str, diag: bool) -> np.ndarray:
    """One batch's :math:`\\sum_n J_n^\\top \\Lambda_n J_n` (per unit noise precision for a
    Gaussian), or its diagonal; ``jac`` (n, out, P), ``f`` (n, out)."""
    if likelihood == "gaussian":
        flat = jac.reshape(-1, jac.shape[-1])
        return np.sum(flat**2, axis=0) if diag else flat.T @ flat
    p = scipy.special.softmax(f, axis=1)
    jp = np.einsum("no,nop->np", p, jac)
    if diag:
        return np.einsum("no,nop->p", p, jac**2) - np.sum(jp**2, axis=0)
    scaled = (jac * np.sqrt(p)[:, :, None]).reshape(-1, jac.shape[-1])
    return scaled.T @ scaled - jp.T @ jp


def _kronecker_features(jac: np.ndarray) -> np.ndarray | None:
    r""":math:`\tilde\phi` (n, P / K) when ``jac`` (n, K, P), K > 1, is
    :math:`\tilde\phi_n^\top \otimes I_K` (weight ``p = i K + k`` moves output ``k`` alone, by
    :math:`\tilde\phi_{ni}`: a dense layer's weights and bias laid out input-major), else None."""
    n, out, size = jac.shape
    if out < 2 or size % out:
        return None
    blocks = jac.reshape(n, out, size // out, out)  # [n, k, i, l] = d f_nk / d theta_{iK+l}
    features = blocks[:, 0, :, 0]
    tol = 1e-6 * max(float(np.abs(features).max()), 1e-30)
    diagonal = np.einsum("nkik->nki", blocks)
    off_diagonal = np.abs(blocks).sum(axis=(1, 3)) - np.abs(diagonal).sum(axis=1)
    kronecker = np.abs(diagonal - features[:, None, :]).max() <= tol
    return features if kronecker and off_diagonal.max() <= out * out * tol else None


def _flush_kronecker(pending: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """The GGN of the ``(features, outputs)`` batches in ``pending``, which it empties."""
    features, f = (np.concatenate(a) for a in zip(*pending, strict=True))
    pending.clear()
    return _ggn_batch_kronecker(features, f)


def _ggn_batch_kronecker(features: np.ndarray, f: np.ndarray) -> np.ndarray:
    r"""One batch's :math:`\sum_n \tilde\phi_n \tilde\phi_n^\top \otimes (\mathrm{diag}(p_n)
    - p_n p_n^\top)` for a softmax, in the input-major layout of :func:`_kronecker_features`:
    the block diagonal :math:`\sum_n p_{nk} \tilde\phi_n \tilde\phi_n^\top` at
    :math:`(ik, jk)`, minus :math:`U^\top U` with :math:`U_n = \tilde\phi_n \otimes p_n`."""
    p = scipy.special.softmax(f, axis=1)
    n, out = p.shape
    width = features.shape[1]
    ggn = np.zeros((width, out, width, out))
    for k in range(out):
        ggn[:, k, :, k] = features.T @ (p[:, k, None] * features)
    u = (features[:, :, None] * p[:, None, :]).reshape(n, width * out)
    return ggn.reshape(width * out, width * out) - u.T @ u


@dataclass(frozen=True)
class Tuned:
    """The hyperparameters :func:`tune` chose.

    Attributes:
        prior_precision: :math:`\\delta`, one per layer group (K,) (all equal unless tuned
            per layer).
        noise_std: :math:`\\sigma` (Gaussian), tuned or as given; None for a categorical
            likelihood.
        log_marginal_likelihood: The Laplace log marginal likelihood there.
        converged: Whether the optimiser reported success (True when nothing was tuned).
    """

    prior_precision: np.ndarray
    noise_std: float | None
    log_marginal_likelihood: float
    converged: bool


def tune(
    curv: Curvature,
    prior_precision: Any,
    noise_std: float | None = None,
    *,
    tune_prior: bool = True,
    per_layer: bool = False,
    tune_noise: bool = False,
) -> Tuned:
    """Maximise the Laplace log marginal likelihood at fixed :math:`\\theta_*` over
    :math:`\\log\\delta` (one, or one per layer with ``per_layer``) when ``tune_prior``, and
    :math:`\\log\\sigma` when ``tune_noise`` (Gaussian only), from ``prior_precision`` (one value
    or one per layer group) and ``noise_std`` (Immer et al. 2021, post hoc)."""
    if tune_noise and curv.likelihood != "gaussian":
        raise ValueError("tune_noise applies to the gaussian likelihood only")
    start = np.log(curv.prior_diagonal(prior_precision))
    per_group = np.array([start[curv.groups == k][0] for k in range(curv.num_groups)])
    shared = not per_layer if tune_prior else bool(np.all(per_group == per_group[0]))
    log_delta = np.array([per_group.mean()]) if shared else per_group
    objective = _Objective(curv, shared)
    free = (log_delta.size if tune_prior else 0) + int(tune_noise)

    def unpack(v: np.ndarray) -> tuple[np.ndarray, float | None]:
        ld = v[: log_delta.size] if tune_prior else log_delta
        return ld, math.exp(v[-1]) if tune_noise else noise_std

    def negative(v: np.ndarray) -> tuple[float, np.ndarray]:
        ld, sigma = unpack(v)
        value, d_delta, d_sigma = objective.value(ld, sigma)
        grad = [*(d_delta if tune_prior else []), *([d_sigma] if tune_noise else [])]
        return -value, -np.asarray(grad, dtype=np.float64)

    converged = True
    if free:
        v0 = np.concatenate(
            [log_delta if tune_prior else [], [math.log(noise_std)] if tune_noise else []]
        )
        v0 = np.clip(v0, *_LOG_BOUNDS)
        result = scipy.optimize.minimize(
            negative, v0, jac=True, method="L-BFGS-B", bounds=[_LOG_BOUNDS] * free
        )
        converged = bool(result.success)
        log_delta, noise_std = unpack(result.x)
    value = objective.value(log_delta, noise_std)[0]
    delta = np.broadcast_to(np.exp(log_delta), (curv.num_groups,)).copy()
    return Tuned(delta, noise_std, value, converged)


class _Objective:
    r"""The Laplace log marginal likelihood and its gradient in :math:`\log\delta_k` and
    :math:`\log\sigma`, in the whitened form :math:`\log\det H - \log\det P_0 = \log\det K`,
    :math:`K = I + P_0^{-1/2} G P_0^{-1/2}`: its eigenvalues are >= 1 up to the rounding of
    :math:`G / \delta`, so it has a Cholesky factor at small :math:`\delta` where
    :math:`G + P_0` (:math:`G` rank-deficient when P > N) has none; where rounding leaves it
    without one, its eigenvalues clipped at 1 stand in. With one :math:`\delta`, from one
    eigendecomposition :math:`G = V \Lambda V^\top`, :math:`\log\det K = \sum_i \log(1 +
    \lambda_i / (\sigma^2 \delta))`; else a Cholesky factor of :math:`K` per evaluation.
    Gradients: :math:`\partial \log\det K / \partial \log\delta_k = \sum_{i \in k}
    (K^{-1})_{ii} - n_k`, :math:`\partial \log\det K / \partial \log\sigma = -2\,
    \mathrm{tr}(K^{-1} (K - I))`."""

    def __init__(self, curv: Curvature, shared: bool = False) -> None:
        self.curv = curv
        self.shared = shared
        self.gaussian = curv.likelihood == "gaussian"
        self.squares = np.bincount(curv.groups, weights=curv.mean**2)
        self.counts = np.bincount(curv.groups)
        self._eigenvalues: np.ndarray | None = None

    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues of :math:`G` (clipped at 0), once."""
        if self._eigenvalues is None:
            self._eigenvalues = np.clip(np.linalg.eigvalsh(self.curv.ggn), 0.0, None)
        return self._eigenvalues

    def value(
        self, log_delta: np.ndarray, noise_std: float | None
    ) -> tuple[float, np.ndarray, float]:
        r"""``(log marginal likelihood, d / d log delta, d / d log sigma)``; ``log_delta`` (and
        its gradient) one value when ``shared`` (every layer group the same :math:`\delta`),
        else one per layer group (K,)."""
        curv = self.curv
        log_delta = np.atleast_1d(np.asarray(log_delta, dtype=np.float64))
        delta = np.broadcast_to(np.exp(log_delta), (curv.num_groups,))
        s = 1.0 / noise_std**2 if self.gaussian else 1.0
        eigenvalues = self.eigenvalues() if self.shared and curv.ggn.ndim == 2 else None
        log_det, k_inv_diag, d_sigma = _whitened(curv, delta, s, eigenvalues)
        value = (
            curv.log_likelihood(noise_std)
            - 0.5 * log_det
            - 0.5 * float(np.sum(delta * self.squares))
        )
        if self.shared:
            d_log_det = np.array([k_inv_diag.sum() - curv.mean.size])
            grad_delta = -0.5 * d_log_det - 0.5 * delta[0] * self.squares.sum()
        else:
            d_log_det = np.bincount(curv.groups, weights=k_inv_diag, minlength=len(delta))
            grad_delta = -0.5 * (d_log_det - self.counts) - 0.5 * delta * self.squares
        grad_sigma = -0.5 * d_sigma
        if self.gaussian:
            grad_sigma += -curv.num_data + curv.sum_squares / noise_std**2
        return value, grad_delta, grad_sigma


def _whitened(
    curv: Curvature, delta: np.ndarray, s: float, eigenvalues: np.ndarray | None = None
) -> tuple[float, np.ndarray, float]:
    r"""``(log det K, diag(K^-1) (P,), d log det K / d log sigma)`` for :math:`K = I + s
    P_0^{-1/2} G P_0^{-1/2}` (:class:`_Objective`), ``delta`` one per layer group, ``s`` the
    noise precision (1 for a categorical likelihood). With ``eigenvalues`` of a full :math:`G`
    (every group the same :math:`\delta`), the trace of :math:`K^{-1}` as one value in place
    of its diagonal."""
    delta_w = delta[curv.groups]
    g = curv.ggn
    if g.ndim == 1:
        r = s * g / delta_w
        return float(np.sum(np.log1p(r))), 1.0 / (1.0 + r), float(np.sum(-2.0 * r / (1.0 + r)))
    if eigenvalues is not None:
        r = s * eigenvalues / delta[0]
        trace = np.array([np.sum(1.0 / (1.0 + r))])
        return float(np.sum(np.log1p(r))), trace, float(np.sum(-2.0 * r / (1.0 + r)))
    d = 1.0 / np.sqrt(delta_w)
    m = s * g * np.outer(d, d)
    k = np.eye(len(d)) + m
    try:
        chol = scipy.linalg.cho_factor(k, lower=True)
        inverse = scipy.linalg.cho_solve(chol, np.eye(len(d)))
        log_det = 2.0 * float(np.sum(np.log(np.diag(chol[0]))))
    except np.linalg.LinAlgError:  # rounding of G / delta at extreme values: K's eigenvalues
        values, vectors = _eigh_at_least_one(k)
        inverse = (vectors / values) @ vectors.T
        log_det = float(np.sum(np.log(values)))
    return log_det, np.diag(inverse).copy(), -2.0 * float(np.sum(inverse * m))


def _eigh_at_least_one(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Eigenvalues and vectors of :math:`K = I + \text{PSD}`, eigenvalues clipped at 1 (what
    rounding pushed below)."""
    values, vectors = np.linalg.eigh(k)
    return np.clip(values, 1.0, None), vectors


def sample(
    curv: Curvature,
    prior_precision: Any,
    noise_std: float | None,
    rng: np.random.Generator,
    num: int,
) -> np.ndarray:
    r"""``num`` draws (num, P) of :math:`\mathcal N(\theta_*, H^{-1})`: with
    :math:`H = P_0^{1/2} K P_0^{1/2}` and :math:`K = L L^\top` (:class:`_Objective`),
    :math:`\theta_* + P_0^{-1/2} L^{-\top} \xi` (:math:`K^{-1/2} \xi` where rounding leaves
    :math:`K` without a Cholesky factor); for a diagonal, :math:`\theta_* + \xi /
    \sqrt{h}`."""
    h = curv.precision(prior_precision, noise_std)
    xi = rng.standard_normal((num, len(curv.mean)))
    if h.ndim == 1:
        return curv.mean + xi / np.sqrt(h)
    d = 1.0 / np.sqrt(curv.prior_diagonal(prior_precision))
    k = np.eye(len(d)) + curv.scaled_ggn(noise_std) * np.outer(d, d)
    try:
        chol = np.linalg.cholesky(k)
        white = scipy.linalg.solve_triangular(chol, xi.T, lower=True, trans="T").T
    except np.linalg.LinAlgError:  # K^(-1/2) from its eigendecomposition
        values, vectors = _eigh_at_least_one(k)
        white = xi @ (vectors / np.sqrt(values)) @ vectors.T
    return curv.mean + d * white
