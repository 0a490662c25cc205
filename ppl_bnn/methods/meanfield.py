r"""Mean-field Gaussian VI by a chosen gradient estimator: the ``meanfield`` driver's shared part.

The guide is the ``svi`` one, :math:`q(z) = \prod_j \mathcal N(z_j; \mu_j, \sigma_j^2)` over every
site in unconstrained space, fitted by Adam on :math:`(\mu, \rho)` with
:math:`\sigma = \operatorname{softplus}(\rho)` to maximise the (beta-)ELBO

.. math:: \mathcal L = \mathbb E_q\Big[c \sum_{i \in B} \log p(y_i \mid x_i, \theta)\Big]
          - \mathrm{KL}(q \,\|\, p),\qquad c = \frac{N}{|B|\,\beta},

where :math:`c` is the model's ``likelihood_scale`` (:func:`~ppl_bnn.model.program.bnn_model`,
through whose program the data term is computed). The data term's estimator is
``options.estimator`` (:mod:`ppl_bnn.model.estimators`) on each layer's weights; other sites (the
noise precision) take ordinary reparameterised draws. The KL is in closed form for a Normal prior,

.. math:: \mathrm{KL}\big(\mathcal N(\mu, \sigma^2) \,\|\, \mathcal N(0, s^2)\big)
          = \log\frac{s}{\sigma} + \frac{\sigma^2 + \mu^2}{2 s^2} - \frac12,

and otherwise the Monte Carlo estimate :math:`\log q(z) - \log p(z)` at a draw :math:`z` of the
site (the one the estimator drew where it drew one), with :math:`\log p` the prior's density in
unconstrained space (:meth:`~ppl_bnn.model.priors.Prior.log_density_unconstrained`). A site under
a hierarchical prior takes its conditional prior at this particle's draws of its latent sites
(:meth:`~ppl_bnn.model.spec.Site.prior_given`); for the horseshoe, a Normal, so its KL is in
closed form given them.

Each backend's ``meanfield`` driver (:mod:`ppl_bnn.backends.numpyro.meanfield`,
:mod:`ppl_bnn.backends.pyro.meanfield`) supplies its arrays, random numbers, the program's scaled
log-likelihood and a compiled step; initial values, the final draws and the output are made here,
so they are the same on both backends for the same seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import numpy as np

from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.base import RunOutput
from ppl_bnn.methods.initialisation import Start, add_start, initial_values
from ppl_bnn.methods.optimisation import GaussianGuideOptions, finish
from ppl_bnn.model.estimators import Noise, layer_output
from ppl_bnn.model.priors import Normal, NormalGivenScale, Prior
from ppl_bnn.model.program import PPL, site_transforms
from ppl_bnn.model.spec import BNNSpec
from ppl_bnn.seeding import numpy_generator

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)

#: ``(values, network, x, y, likelihood_scale) -> c * sum_i log p(y_i | ...)``: the scaled
#: log-likelihood of the model program run with the site ``values`` and the ``network``.
Observe = Callable[[Mapping[str, Any], Callable[..., Any], Any, Any, float], Any]


def initial_guide(
    name: str, target: Target, options: GaussianGuideOptions, seed: int
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], Start]:
    """``(loc, scale, start)``: the guide's means where ``options.init_loc`` says (the same
    start as the autoguides', :func:`~ppl_bnn.methods.initialisation.initial_values`), mapped
    to unconstrained space, every std ``options.init_scale``, and the start's record."""
    start = initial_values(name, target, options, seed)
    loc = {
        site.name: np.asarray(site.prior.unconstrain(start.values[site.name]), dtype=np.float32)
        for site in target.spec.sites()
    }
    scale = {k: np.full(v.shape, options.init_scale, dtype=np.float32) for k, v in loc.items()}
    return loc, scale, start


def inverse_softplus(value: np.ndarray) -> np.ndarray:
    r""":math:`\rho = \log(e^\sigma - 1)`: :math:`\operatorname{softplus}(\rho) = \sigma`."""
    value = np.asarray(value, dtype=np.float64)
    return (value + np.log(-np.expm1(-value))).astype(np.float32)


def closed_form_kl(prior: Prior, loc: Any, scale: Any, xp: ModuleType) -> Any | None:
    """KL(N(loc, scale^2) || prior) summed over a site, for a Normal prior (its stds an array
    for a hierarchical prior's conditional one); None for others."""
    if isinstance(prior, Normal):
        s, log_s = prior.scale, math.log(prior.scale)
    elif isinstance(prior, NormalGivenScale):
        s = prior.aligned(tuple(loc.shape))[0]
        log_s = xp.log(s)
    else:
        return None
    return (log_s - xp.log(scale) + (scale**2 + loc**2) / (2 * s**2) - 0.5).sum()


def monte_carlo_kl(prior: Prior, loc: Any, scale: Any, z: Any, xp: ModuleType) -> Any:
    r""":math:`\log q(z) - \log p(z)` at a draw ``z`` of the site (unconstrained space)."""
    log_q = (-0.5 * ((z - loc) / scale) ** 2 - xp.log(scale) - _HALF_LOG_2PI).sum()
    return log_q - prior.log_density_unconstrained(z, xp.exp, xp.log)


def elbo_terms(
    spec: BNNSpec,
    estimator: str,
    loc: Mapping[str, Any],
    scale: Mapping[str, Any],
    x: Any,
    y: Any,
    likelihood_scale: float,
    noise: Noise,
    observe: Observe,
    ppl: PPL,
    xp: ModuleType,
) -> tuple[Any, Any]:
    """One draw of the (beta-)ELBO's two terms for the guide ``(loc, scale)`` on the batch
    ``(x, y)``: ``(KL estimate, scaled log-likelihood)``, whose difference is the loss.

    Random numbers are taken from ``noise`` in a fixed order (other sites, then each layer's as
    its estimator asks, then the KL's draws), so that identical noise gives the identical value
    on both backends.
    """
    transforms = site_transforms(spec, ppl)
    layer_sites = {name for _, kinds in spec.layer_params for name in kinds.values()}
    values: dict[str, Any] = {}
    kl: Any = 0.0
    for site in spec.sites():
        if site.name in layer_sites:
            values[site.name] = loc[site.name]  # unread: the network samples the weights
            continue
        z = loc[site.name] + scale[site.name] * noise.normal(site.shape)
        values[site.name] = transforms[site.name](z)
        prior = site.prior_given(values)
        kl = kl + monte_carlo_kl(prior, loc[site.name], scale[site.name], z, xp)
    drawn: dict[str, Any] = {}

    def network(params: Mapping[str, Any], h: Any, numbers: Mapping[str, Any] | None) -> Any:
        for layer, kinds in spec.layer_params:
            if not kinds:
                h = layer.forward({}, h, ppl)
                continue
            layer_loc = {kind: loc[name] for kind, name in kinds.items()}
            layer_scale = {kind: scale[name] for kind, name in kinds.items()}
            h, weights = layer_output(layer, estimator, layer_loc, layer_scale, h, noise, ppl)
            if weights is not None:
                drawn.update({kinds[kind]: value for kind, value in weights.items()})
        return h

    log_likelihood = observe(values, network, x, y, likelihood_scale)
    for site in spec.sites():
        if site.name not in layer_sites:
            continue
        m, s = loc[site.name], scale[site.name]
        prior = site.prior_given(values)
        closed = closed_form_kl(prior, m, s, xp)
        if closed is None:
            z = drawn.get(site.name)
            if z is None:
                z = m + s * noise.normal(site.shape)
            closed = monte_carlo_kl(prior, m, s, z, xp)
        kl = kl + closed
    return kl, log_likelihood


def particle_terms(
    target: Target,
    options: GaussianGuideOptions,
    observe: Observe,
    ppl: PPL,
    xp: ModuleType,
) -> Callable[..., tuple[Any, Any]]:
    """``(loc, scale, noise, x, y, likelihood_scale) -> (loss, log_lik)``: the negative ELBO and
    its scaled log-likelihood term (:func:`elbo_terms`), each averaged over
    ``options.num_particles`` draws, for the guide with means ``loc`` and stds ``scale`` (dicts
    of the backend's arrays by site)."""

    def terms(loc, scale, noise, x, y, likelihood_scale):
        total, log_lik = 0.0, 0.0
        for _ in range(options.num_particles):
            kl, ll = elbo_terms(
                target.spec, options.estimator, loc, scale, x, y, likelihood_scale, noise,
                observe, ppl, xp,
            )  # fmt: skip
            total, log_lik = total + kl - ll, log_lik + ll
        return total / options.num_particles, log_lik / options.num_particles

    return terms


def guide_draws(
    spec: BNNSpec,
    loc: Mapping[str, np.ndarray],
    scale: Mapping[str, np.ndarray],
    num: int,
    seed: int,
) -> dict[str, np.ndarray]:
    """``num`` draws of every site from the fitted guide, mapped to the sites' supports."""
    rng = numpy_generator(seed, "meanfield_draws")
    draws = {}
    for site in spec.sites():
        z = loc[site.name] + scale[site.name] * rng.standard_normal((num, *site.shape))
        draws[site.name] = np.exp(z) if site.positive else z
    return draws


def finish_meanfield(
    name: str,
    target: Target,
    options: GaussianGuideOptions,
    seed: int,
    losses: np.ndarray,
    guide: tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]],
    timings: dict[str, float],
    info: dict[str, Any],
    start: Start,
) -> RunOutput:
    """The driver's output from the fitted guide ``(loc, scale)`` (numpy, by site): draws, the
    guide as ``variational``, the losses, and ``info`` recording the estimator and the start
    (whose cost is added to ``timings``)."""
    loc, scale = ({k: np.asarray(v, dtype=np.float32) for k, v in g.items()} for g in guide)
    draws = guide_draws(target.spec, loc, scale, options.draws, seed)
    variational = {"loc": loc, "scale": scale}
    info = {**info, "guide": "meanfield", "estimator": options.estimator}
    add_start(timings, info, start)
    return finish(name, target, options, losses, draws, timings, variational, info)


def guide_params(loc: Mapping[str, Any], scale: Mapping[str, Any]) -> dict[str, Any]:
    """The guide's parameters by ``<site>_loc`` and ``<site>_scale`` (for
    :func:`~ppl_bnn.methods.optimisation.check_losses` to name the sites that broke down)."""
    out = {f"{k}_loc": v for k, v in loc.items()}
    out.update({f"{k}_scale": v for k, v in scale.items()})
    return out
