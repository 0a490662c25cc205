"""The one BNN program, written once against a PPL namespace.

Pyro and NumPyro share their modelling vocabulary (``sample``, ``plate``, ``distributions.Normal``,
``.expand(...).to_event(...)``, ``Categorical(logits=...)``), and torch tensors and JAX arrays
share ``@`` and broadcasting. Each backend hands :func:`bnn_model` a :class:`PPL` built from its own
library, so the network is compiled from the spec, never written twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

from ppl_bnn.model.priors import Normal, normal_distribution
from ppl_bnn.model.spec import PRECISION_SITE, BNNSpec, Site


@dataclass(frozen=True)
class PPL:
    """The pieces of a probabilistic programming language that the BNN program uses.

    Attributes:
        name: Backend name (``"pyro"`` or ``"numpyro"``).
        sample: ``pyro.sample`` / ``numpyro.sample``.
        plate: ``pyro.plate`` / ``numpyro.plate``.
        param: ``(name, initial value, constraint) -> value``: ``pyro.param`` /
            ``numpyro.param``, a point-estimated parameter of the model.
        scale: ``pyro.poutine.scale`` / ``numpyro.handlers.scale``.
        dist: The distributions module.
        biject_to: Constraint -> bijection from unconstrained space (the library's registry).
        activations: Activation name -> elementwise function on that library's arrays.
        conv2d: ``conv2d(x, w, stride, padding)``: the cross-correlation of images ``x``
            (*Bx, N, H, W, C) with filters ``w`` (*Bw, kh, kw, C, O), batch axes ``Bx`` and
            ``Bw`` broadcast, ``stride`` a pair, ``padding`` ((top, bottom), (left, right)) in
            zeros; returns (*B, N, H', W', O).
        pool: ``pool(x, reduce, size)``: ``"max"`` or ``"avg"`` over non-overlapping ``size``
            windows (a pair) of ``x`` (..., H, W, C), leftover rows and columns dropped.
        draw: ``draw(distribution, shape)``: a draw of ``shape`` from a distribution of the
            library with its seeded randomness, reparameterised where it can be, not a site
            (dropout masks, :mod:`ppl_bnn.model.dropout`).
        factor: ``pyro.factor`` / ``numpyro.factor``: a term added to the log joint.
        stack: ``stack(values)``: numbers or 0-d arrays as one 1-d float array of the library
            (a prior's hyperparameters, :mod:`ppl_bnn.model.priors`).
    """

    name: str
    sample: Callable[..., Any]
    plate: Callable[..., Any]
    param: Callable[[str, float, Any], Any]
    scale: Callable[..., Any]
    dist: ModuleType
    biject_to: Callable[[Any], Any]
    activations: Mapping[str, Callable[[Any], Any]]
    conv2d: Callable[..., Any]
    pool: Callable[..., Any]
    draw: Callable[[Any, Any], Any]
    factor: Callable[[str, Any], Any]
    stack: Callable[[Sequence[Any]], Any]


#: Prefix of the ``param`` sites of a learned prior's hyperparameters (``prior_pi``, ...).
HYPERPARAMETER_PREFIX = "prior_"


#: The known Gaussian noise std's name among a model's numbers (:func:`model_numbers`).
NOISE_NUMBER = "noise"


def model_numbers(spec: BNNSpec) -> dict[str, float]:
    """The numbers of ``spec`` that a compiled program takes as arguments rather than holding
    them as constants: the known Gaussian noise std (:data:`NOISE_NUMBER`) and the std of every
    site whose layer has a :class:`~ppl_bnn.model.priors.Normal` prior (by site name).

    A program compiled for :func:`numberless` of a spec and given these numbers at run time
    (``bnn_model(..., numbers=...)``) serves every spec that differs only in them: the noise
    and prior scales a tuning grid tries, the noise known in each split's units."""
    numbers = {
        name: prior.scale
        for prior, sites in zip(spec.priors, _parametrised(spec), strict=True)
        if isinstance(prior, Normal)
        for name in sites.values()
    }
    if spec.likelihood == "gaussian" and not spec.learned_noise:
        numbers[NOISE_NUMBER] = spec.noise
    return numbers


def numberless(spec: BNNSpec) -> BNNSpec:
    """``spec`` with each of its :func:`model_numbers` set to 1: what a program that takes them
    as arguments depends on (the key it is kept under)."""
    priors = tuple(Normal(1.0) if isinstance(p, Normal) else p for p in spec.priors)
    known = spec.likelihood == "gaussian" and not spec.learned_noise
    return replace(spec, priors=priors, noise=1.0 if known else spec.noise)


def _parametrised(spec: BNNSpec) -> list[dict[str, str]]:
    """Per layer with parameters (the order of ``spec.priors``), its sites by kind."""
    return [sites for _, sites in spec.layer_params if sites]


def prior(
    site: Site,
    ppl: PPL,
    values: Mapping[str, Any],
    learned: Mapping[str, Any] | None = None,
    numbers: Mapping[str, Any] | None = None,
) -> Any:
    """The prior distribution of ``site`` in ``ppl``'s library, given the ``values`` of the
    sites before it (a hierarchical prior's latent sites); a learned prior takes its
    hyperparameters from ``learned`` (see :func:`learned_hyperparameters`), a Normal prior its
    std from ``numbers`` where they hold the site (:func:`model_numbers`)."""
    if numbers is not None and site.name in numbers:
        return normal_distribution(ppl, site.shape, numbers[site.name])
    if learned is not None and site.prior.learned:
        return site.prior.distribution(ppl, site.shape, learned)
    return site.prior_given(values).distribution(ppl, site.shape)


def learned_hyperparameters(spec: BNNSpec, ppl: PPL) -> dict[str, Any] | None:
    """The learned prior's hyperparameters as the model's ``param`` sites (``prior_<name>``,
    constrained to their support, starting at the prior's values); None without one."""
    learned = spec.learned_prior
    if learned is None:
        return None
    return {
        name: ppl.param(
            HYPERPARAMETER_PREFIX + name, init, getattr(ppl.dist.constraints, constraint)
        )
        for name, (init, constraint) in learned.hyperparameters.items()
    }


def forward(spec: BNNSpec, params: Mapping[str, Any], x: Any, ppl: PPL) -> Any:
    """Network output ``f`` for inputs ``x`` (N, *input_shape), layer by layer with ``ppl``'s
    array ops.

    Parameters may carry leading batch axes (draws): ``w_l`` of shape (..., in, out) (or
    (..., kh, kw, in, out) for a convolution) and ``b_l`` of shape (..., out) give ``f`` of shape
    (..., N, out).
    """
    h = x
    for layer, sites in spec.layer_params:
        h = layer.forward({kind: params[name] for kind, name in sites.items()}, h, ppl)
    return h


def noise_std(
    spec: BNNSpec, params: Mapping[str, Any], numbers: Mapping[str, Any] | None = None
) -> Any:
    """Gaussian noise std: the known value (from ``numbers`` where given: :func:`model_numbers`),
    or ``precision ** -0.5`` when learned."""
    if spec.learned_noise:
        return params[PRECISION_SITE] ** -0.5
    return spec.noise if numbers is None else numbers[NOISE_NUMBER]


def _drop_data_plate_slot(value: Any, site: Site) -> Any:
    """Remove the size-1 batch slot that a vectorising plate leaves for the data plate.

    Under a plate that vectorises the whole model (Pyro's ``vectorize_particles``), a weight of
    shape (in, out) is drawn with shape (P, 1, in, out): the trailing 1 is the data plate's dim.
    Dropping it makes the output (P, N, out) line up with the plates (P at -2, data at -1).
    Values whose batch shape has no such slot, e.g. (P, in, out) from a joint guide, are kept.
    """
    extra = value.ndim - len(site.shape)
    if extra >= 2 and value.shape[extra - 1] == 1:
        return value.reshape(tuple(value.shape[: extra - 1]) + tuple(value.shape[extra:]))
    return value


def bnn_model(
    spec: BNNSpec,
    ppl: PPL,
    x: Any,
    y: Any | None = None,
    likelihood_scale: float = 1.0,
    network: Callable[[Mapping[str, Any], Any, Mapping[str, Any] | None], Any] | None = None,
    numbers: Mapping[str, Any] | None = None,
) -> Any:
    r"""The BNN as a generative program: priors on every site, then the likelihood of ``y``.

    A learned prior's hyperparameters are ``param`` sites, point-estimated by the optimisation
    methods together with the guide; elsewhere they keep their initial values.

    ``likelihood_scale`` multiplies the log-likelihood term, and is the one place where
    minibatching and tempering enter the log joint:

    .. math::

        \log \tilde p(\theta, y_B)
        = \log p(\theta) + c \sum_{i \in B} \log p(y_i \mid x_i, \theta),

    with :math:`c = N / |B|` for an unbiased minibatch estimate of the full-data log joint
    (divided by a KL weight :math:`\beta` for beta-VI, by a temperature for tempered posteriors).

    ``network(params, x, numbers)`` replaces :func:`forward` when given: a gradient estimator
    that samples pre-activations rather than weights (:mod:`ppl_bnn.model.estimators`) passes its
    own, and so does training-time dropout (:mod:`ppl_bnn.model.dropout`).

    ``numbers`` (:func:`model_numbers`), where given, replace the spec's known noise std and
    Normal prior stds: a compiled program passes them as its arguments, so that one program
    serves every spec that differs only in them.

    Returns the network output ``f`` (N, output_dim).
    """
    learned = learned_hyperparameters(spec, ppl)
    drawn: dict[str, Any] = {}  # as sampled, batch slots kept: a conditional prior's batch
    params: dict[str, Any] = {}
    for site in spec.sites():
        drawn[site.name] = ppl.sample(site.name, prior(site, ppl, drawn, learned, numbers))
        params[site.name] = _drop_data_plate_slot(drawn[site.name], site)
    f = forward(spec, params, x, ppl) if network is None else network(params, x, numbers)
    with ppl.plate("data", x.shape[0]), ppl.scale(scale=likelihood_scale):
        if spec.likelihood == "gaussian":
            sigma = noise_std(spec, params, numbers)
            if spec.learned_noise:
                sigma = sigma[..., None]  # one noise std per draw, broadcast over the data
            ppl.sample("y", ppl.dist.Normal(f[..., 0], sigma), obs=y)
        else:
            ppl.sample("y", ppl.dist.Categorical(logits=f), obs=y)
    return f


def site_transforms(spec: BNNSpec, ppl: PPL) -> dict[str, Any]:
    """Per site, the library's bijection from unconstrained space onto the prior's support:
    ``exp`` onto (0, inf) for a positive site, the identity on the real line."""
    constraints = ppl.dist.constraints
    return {
        site.name: ppl.biject_to(constraints.positive if site.positive else constraints.real)
        for site in spec.sites()
    }


def constrain(transforms: Mapping[str, Any], z: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    r"""Map unconstrained values to the sites' supports, as the PPLs' samplers do.

    Returns ``(theta, log_det)`` with :math:`\theta = T(z)` per site and
    :math:`\sum \log|\det J_T(z)|` (zero for real-valued sites, ``z`` for ``exp``).
    """
    theta, log_det = {}, 0.0
    for name, transform in transforms.items():
        theta[name] = transform(z[name])
        log_det = log_det + transform.log_abs_det_jacobian(z[name], theta[name]).sum()
    return theta, log_det
