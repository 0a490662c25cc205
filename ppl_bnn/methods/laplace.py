r"""``laplace``: a Gaussian at the mode (MacKay 1992).

By default (``hessian="ggn"``) the linearised Laplace approximation the field uses for neural
networks (Immer et al. 2021; Daxberger et al. 2021, the ``laplace-torch`` library):

1. a ``map`` fit (its options, the spec's prior, the fit's seed: the point of ``fit(model,
   "map", seed=seed)`` with the same options) gives :math:`\theta_*`. By default that fit
   stops early on held-out points (:mod:`ppl_bnn.methods.early_stopping`), so
   :math:`\theta_*` is a trained network rather than an exact mode, as in Laplace Redux's
   post-hoc use; ``keep="lowest"`` gives the mode. The GGN needs no mode to be positive
   semi-definite, and the marginal likelihood below is then evaluated at :math:`\theta_*`;
2. the generalised Gauss-Newton matrix :math:`G = \sum_n J_n^\top \Lambda_n J_n` at
   :math:`\theta_*` (:mod:`ppl_bnn.methods.ggn`: full, diagonal or last layer), positive
   semi-definite, so :math:`H = G + P_0` is positive definite for any prior precision
   :math:`P_0 = \mathrm{diag}(\delta) \succ 0`;
3. post hoc, :math:`\delta` (one, or one per layer) and, for a Gaussian likelihood with learned
   noise, :math:`\sigma` maximise the Laplace marginal likelihood
   :math:`\log p(\mathcal D \mid \theta_*, \sigma) - \frac12(\log\det H - \log\det P_0)
   - \frac12 \theta_*^\top P_0 \theta_*` (an empirical-Bayes choice: the ``map`` fit used the
   spec's prior, the Gaussian uses the tuned one);
4. draws :math:`\theta_s \sim \mathcal N(\theta_*, H^{-1})` (weights outside the last layer,
   for ``structure="last_layer"``, fixed at the mode; a learned noise precision at
   :math:`\sigma^{-2}`), and with ``predictive="glm"`` the mode as ``linearised_at``: the
   predictive of the linearised network :math:`f(x, \theta_*) + J(x)(\theta_s - \theta_*)`
   (the GLM predictive of Immer, Korzepa & Bauer 2021), which the GGN posterior is the exact
   Laplace posterior of.

``info["laplace"]`` records ``hessian``, ``structure``, ``prior_precision`` (one value, or one per
layer), ``noise_std`` (Gaussian; ``map_noise_std``, the ``map`` fit's, for a learned noise),
``log_marginal_likelihood``, ``predictive``, what was ``tuned`` and whether the optimiser
``converged``.

``hessian="full"`` keeps the Laplace approximation of the whole log joint:
``AutoLaplaceApproximation`` in both libraries (:mod:`ppl_bnn.methods.optimisation`), its
covariance the inverse Hessian of :math:`-\log p` at the optimum, which raises
:class:`~ppl_bnn.methods.base.HessianError` when that Hessian is not positive definite.

References: D. J. C. MacKay. A Practical Bayesian Framework for Backpropagation Networks.
Neural Computation 1992. A. Immer, M. Korzepa, M. Bauer. Improving predictions of Bayesian
neural nets via local linearization. AISTATS 2021. A. Immer, M. Bauer, V. Fortuin, G. Rätsch,
M. E. Khan. Scalable Marginal Likelihood Estimation for Model Selection in Deep Learning. ICML
2021. E. Daxberger, A. Kristiadi, A. Immer, R. Eschenhagen, M. Bauer, P. Hennig. Laplace Redux:
Effortless Bayesian Deep Learning. NeurIPS 2021.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ppl_bnn.engine.contracts import Target
from ppl_bnn.engine.registry import get_driver
from ppl_bnn.methods import ggn, map_estimate
from ppl_bnn.methods.base import Family, Method, RunOutput
from ppl_bnn.methods.checks import check_bool, check_choice, check_positive_float
from ppl_bnn.methods.optimisation import SampledGuideOptions
from ppl_bnn.model.priors import Normal
from ppl_bnn.model.spec import PRECISION_SITE, BNNSpec
from ppl_bnn.seeding import numpy_generator
from ppl_bnn.timing import now

logger = logging.getLogger(__name__)

#: ``"ggn"``: the GGN Laplace of the network weights; ``"full"``: the Hessian of the log joint.
HESSIANS: tuple[str, ...] = ("ggn", "full")
#: ``"glm"``: the linearised network's predictive; ``"sampled"``: the network at each draw.
PREDICTIVES: tuple[str, ...] = ("glm", "sampled")
#: Prior precisions by name: tuned by the marginal likelihood, or the spec's Normal priors.
PRIOR_PRECISIONS: tuple[str, ...] = ("marglik", "prior")
#: The options only the GGN Laplace reads, with their defaults.
_GGN_ONLY = {
    "keep": None,
    "structure": "full",
    "prior_precision": "marglik",
    "prior_precision_per_layer": False,
}


@dataclass(frozen=True, kw_only=True)
class LaplaceOptions(SampledGuideOptions):
    """Options of ``fit(..., method="laplace")``: the ``map`` options for the mode (``num_steps``,
    ``learning_rate``, ``batch_size``, ...), then the Gaussian's.

    Attributes:
        hessian: ``"ggn"`` (default) or ``"full"`` (``AutoLaplaceApproximation``; the options
            below but ``num_draws`` and ``predictive="sampled"`` do not apply to it).
        structure: ``"full"`` (the GGN of every network weight, up to
            :data:`~ppl_bnn.methods.ggn.MAX_FULL_WEIGHTS`), ``"diag"`` (its diagonal) or
            ``"last_layer"`` (the full GGN of the last parametrised layer's weights and bias,
            every other weight fixed at the mode; the practical choice for image-size nets).
        predictive: ``"glm"`` (the linearised network around the mode) or ``"sampled"`` (the
            network at each draw); ``None``: ``"glm"`` for the GGN, ``"sampled"`` for
            ``hessian="full"`` (the only one it has).
        prior_precision: :math:`\\delta`: ``"marglik"`` (maximise the Laplace marginal
            likelihood, from the spec's Normal prior precision or 1), ``"prior"`` (the spec's
            Normal priors, :math:`1 / s_l^2` per layer) or a number > 0.
        prior_precision_per_layer: With ``"marglik"``: one :math:`\\delta` per parametrised
            layer (weights and bias together) rather than one for all.
        tune_noise: Gaussian likelihood with learned noise: fit :math:`\\sigma` by the marginal
            likelihood too (else the ``map`` fit's); a known noise stays fixed.
        keep: The ``map`` fit's ``keep`` (:class:`~ppl_bnn.methods.map_estimate.MAPOptions`):
            ``None``, early stopping on 200 training points or more; ``"lowest"``, the mode.
        num_draws: Draws from the Gaussian.
    """

    GUIDE: ClassVar[str] = "AutoLaplaceApproximation"

    keep: str | None = None
    hessian: str = "ggn"
    structure: str = "full"
    predictive: str | None = None
    prior_precision: str | float = "marglik"
    prior_precision_per_layer: bool = False
    tune_noise: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("hessian", self.hessian, HESSIANS)
        check_choice("structure", self.structure, ggn.STRUCTURES)
        if self.predictive is not None:
            check_choice("predictive", self.predictive, PREDICTIVES)
        if isinstance(self.prior_precision, str):
            check_choice("prior_precision", self.prior_precision, PRIOR_PRECISIONS)
        else:
            check_positive_float("prior_precision", self.prior_precision)
        check_bool("prior_precision_per_layer", self.prior_precision_per_layer)
        check_bool("tune_noise", self.tune_noise)
        if self.prior_precision_per_layer and self.prior_precision != "marglik":
            raise ValueError(
                "prior_precision_per_layer tunes one precision per layer: it needs "
                f"prior_precision='marglik', got {self.prior_precision!r}"
            )
        if self.hessian == "full":
            for name, default in _GGN_ONLY.items():
                if getattr(self, name) != default:
                    raise ValueError(
                        f"{name} applies to hessian='ggn' only; hessian='full' takes the "
                        "spec's prior and the Hessian of the whole log joint"
                    )
            if self.predictive == "glm":
                raise ValueError(
                    "predictive='glm' applies to hessian='ggn' only: hessian='full' predicts "
                    "with the network at each draw"
                )
        elif self.kl_weight != 1.0:
            raise ValueError(
                "the GGN Laplace approximates the posterior itself: kl_weight must be 1, got "
                f"{self.kl_weight!r} (hessian='full' takes a tempered likelihood)"
            )
        else:
            self.map_options()  # the map fit's options (keep) are checked here

    @property
    def predictive_kind(self) -> str:
        """The predictive: :attr:`predictive`, or the hessian's default."""
        if self.predictive is not None:
            return self.predictive
        return "glm" if self.hessian == "ggn" else "sampled"

    def map_options(self) -> map_estimate.MAPOptions:
        """The options of the ``map`` fit behind it (:func:`~ppl_bnn.methods.map_estimate.
        map_options_of`)."""
        return map_estimate.map_options_of(self)


def spec_prior_precision(spec: BNNSpec, names: tuple[str, ...]) -> np.ndarray:
    """:math:`1 / s_l^2` of each parametrised layer holding a site of ``names``, in order;
    ``ValueError`` for a prior that is not Normal."""
    layers = [sites for _, sites in spec.layer_params if sites]
    values = []
    for index, sites in enumerate(layers):
        if not set(sites.values()) & set(names):
            continue
        prior = spec.priors[index]
        if not isinstance(prior, Normal):
            raise ValueError(
                f"prior_precision='prior' needs Normal priors, but layer {index} has "
                f"{prior!r}: give prior_precision='marglik' or a number"
            )
        values.append(1.0 / prior.scale**2)
    return np.asarray(values)


def _start_precision(spec: BNNSpec, names: tuple[str, ...]) -> np.ndarray | float:
    """Where the tuning starts: the spec's Normal precisions, else 1."""
    try:
        return spec_prior_precision(spec, names)
    except ValueError:
        return 1.0


def run(name: str, target: Target, options: LaplaceOptions, seed: int) -> RunOutput:
    """``hessian="full"``: the ``autoguide`` driver; else the ``map`` fit, the GGN, the tuning
    and the Gaussian's draws (one chain)."""
    if options.hessian == "full":
        out = get_driver(target.backend, "autoguide")(name, target, options, seed)
        out.info["laplace"] = {"hessian": "full", "predictive": "sampled"}
        return out
    spec, model = target.spec, target.model
    names = ggn.laplace_sites(spec, options.structure)
    ggn.check_size(spec, options.structure)  # before the MAP fit
    if options.prior_precision == "prior":
        spec_prior_precision(spec, names)  # a non-Normal prior fails before the MAP fit
    # The seed of ``fit(model, "map", seed=seed)``: the same mode, so that the two compare
    # paired.
    mode = map_estimate.METHOD.run_on(target.backend)(name, target, options.map_options(), seed)
    start = now()
    at_mode = {k: v[0, 0] for k, v in mode.draws.items()}
    curv = ggn.curvature(target.backend, spec, at_mode, model.x, model.y, options.structure)
    noise_std = None
    if spec.likelihood == "gaussian":
        noise_std = (
            float(at_mode[PRECISION_SITE]) ** -0.5 if spec.learned_noise else float(spec.noise)
        )
    if options.prior_precision == "prior":
        delta0: Any = spec_prior_precision(spec, names)
    elif options.prior_precision == "marglik":
        delta0 = _start_precision(spec, names)
    else:
        delta0 = float(options.prior_precision)
    tuned = ggn.tune(
        curv,
        delta0,
        noise_std,
        tune_prior=options.prior_precision == "marglik",
        per_layer=options.prior_precision_per_layer,
        tune_noise=spec.learned_noise and options.tune_noise,
    )
    fitted = now()
    z = ggn.sample(
        curv,
        tuned.prior_precision,
        tuned.noise_std,
        numpy_generator(seed, f"{name}_draws"),
        options.num_draws,
    )
    draws = _draws(spec, curv.layout.unflatten(z), at_mode, tuned.noise_std, options.num_draws)
    drawn = now()
    linearised_at = None
    if options.predictive_kind == "glm":  # the network at the mode, the noise precision as drawn
        linearised_at = {k: np.asarray(v, dtype=np.float32) for k, v in at_mode.items()}
        if PRECISION_SITE in linearised_at:
            linearised_at[PRECISION_SITE] = draws[PRECISION_SITE][0, 0]
    summary = _summary(spec, options, tuned, noise_std)
    if not tuned.converged:
        logger.warning("%s: the marginal likelihood's optimiser did not report convergence", name)
    timings = {
        "compile": mode.timings["compile"],
        "warmup": mode.timings["warmup"] + (fitted - start),
        "sampling": mode.timings.get("sampling", 0.0) + (drawn - fitted),
    }
    info = {**mode.info, "laplace": summary}
    info.pop("guide", None)
    return RunOutput(
        draws=draws, timings=timings, losses=mode.losses, info=info, linearised_at=linearised_at
    )


def _draws(
    spec: BNNSpec,
    weights: dict[str, np.ndarray],
    at_mode: dict[str, Any],
    noise_std: float | None,
    num_draws: int,
) -> dict[str, np.ndarray]:
    """Every site's draws, one chain: the Gaussian's ``weights`` where it covers the site, the
    noise precision its tuned value, and the other sites at the mode."""
    draws = {}
    for site in spec.sites():
        if site.name in weights:
            values = weights[site.name]
        elif site.name == PRECISION_SITE:
            values = np.full((num_draws,), noise_std**-2)
        else:
            values = np.broadcast_to(at_mode[site.name], (num_draws, *site.shape))
        draws[site.name] = np.asarray(values, dtype=np.float32)[None]
    return draws


def _summary(
    spec: BNNSpec, options: LaplaceOptions, tuned: ggn.Tuned, map_noise_std: float | None
) -> dict[str, Any]:
    """``info["laplace"]``: the Hessian, the structure, the prior precision and the noise as
    tuned, the log marginal likelihood and whether its optimiser converged."""
    delta = tuned.prior_precision
    summary: dict[str, Any] = {
        "hessian": "ggn",
        "structure": options.structure,
        "prior_precision": float(delta[0]) if np.all(delta == delta[0]) else delta.tolist(),
        "log_marginal_likelihood": tuned.log_marginal_likelihood,
        "predictive": options.predictive_kind,
        "tuned": [
            *(["prior_precision"] if options.prior_precision == "marglik" else []),
            *(["noise_std"] if spec.learned_noise and options.tune_noise else []),
        ],
        "converged": tuned.converged,
    }
    if map_noise_std is not None:
        summary["noise_std"] = tuned.noise_std
    if spec.learned_noise:
        summary["map_noise_std"] = map_noise_std
    return summary


METHOD = Method(
    name="laplace",
    summary="Gaussian at the mode: GGN precision, tuned prior (or the full Hessian)",
    options=LaplaceOptions,
    family=Family.OPTIMISATION,
    needs_mode=True,
    smoke={"num_steps": 30, "num_draws": 5},
    run=run,
    requires=("autoguide", "jacobian", "linearised"),
)
