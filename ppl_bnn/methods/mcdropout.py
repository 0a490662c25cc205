r"""MC dropout (``mcdropout``; Gal & Ghahramani 2016), and concrete dropout (Gal, Hron & Kendall
2017) with ``concrete=True``.

**Training.** MAP (the ``map`` driver, Adam on minibatches) on the model trained with dropout on
the input of every dense layer (:mod:`ppl_bnn.model.dropout`): each step maximises

.. math:: c \log p(y_B \mid x_B, W, m) + \log p(W), \qquad c = N / |B|,

a fresh Bernoulli(:math:`1 - p`) mask :math:`m` per example and unit at every step, inputs
scaled by :math:`1 / (1 - p)`; one step is an unbiased estimate of the gradient of
:math:`\mathbb E_m[c \log p(y_B \mid x_B, W, m)] + \log p(W)`. The weight decay is the spec's
prior (:math:`\lVert W \rVert^2 / 2 s^2` for a Normal prior of std :math:`s`): the MAP of the
log joint, as in Gal's UCI code (github.com/yaringal/DropoutUncertaintyExps, ``net.py``: a
``Dropout`` before every ``Dense``, L2 on the weights). A learned noise precision is fitted as
in ``map``. With ``concrete=True`` each dense layer's rate is learned along with the weights
(relaxed masks and the regulariser of Gal et al. 2017; :mod:`ppl_bnn.model.dropout`).

**Prediction.** As every method's, from draws of the weights (:mod:`ppl_bnn.predictive`).
Dropout on the inputs of a dense layer zeroes rows of its weight matrix,

.. math:: \frac{h \odot m}{1 - p}\, W = h \Big(\operatorname{diag}\Big(\frac{m}{1 - p}\Big)
          W\Big),

so each of the ``num_draws`` = :math:`T` draws is the trained weights with a fresh row mask,
scaled by :math:`1 / (1 - p_l)`, on every dense layer's :math:`W_l` (biases, convolutions and
the noise as trained). A draw's mask is shared by every test point, where MC dropout draws one
per point and pass; the per-point predictive :math:`p(y \mid x) = \mathbb E_m p(y \mid x, m)`
and every per-point quantity (log predictive density, predictive mean and variance) are the
same, so this is MC dropout's predictive with :math:`T` stochastic passes. With concrete dropout
the masks are hard Bernoulli ones at the learned rates (``info["dropout_rates"]``).

References: Y. Gal, Z. Ghahramani. Dropout as a Bayesian Approximation: Representing Model
Uncertainty in Deep Learning. ICML 2016. Y. Gal, J. Hron, A. Kendall. Concrete Dropout.
NeurIPS 2017.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from ppl_bnn.engine.contracts import Target
from ppl_bnn.engine.registry import get_backend
from ppl_bnn.methods import map_estimate
from ppl_bnn.methods.base import Family, Method, RunOutput
from ppl_bnn.methods.checks import check_bool, check_positive_float, check_positive_int
from ppl_bnn.model.dropout import Dropout, dense_weights
from ppl_bnn.seeding import numpy_generator
from ppl_bnn.timing import now

#: The rate without ``dropout_rate``, for either likelihood: 0.01, of the grid of Gal's UCI code
#: (0.005, 0.01, 0.05, 0.1), with the noise learned as in ``map``. A higher rate adds a spread to
#: every prediction that the learned noise, fitted under dropout, does not give back, so on sets
#: whose residuals are small next to the targets' std it under-fits the predictive. Validation
#: in the uci and default suites (digits: 50 tanh units) chose the lowest rates of their grids
#: most often, and 0.05 stays far below MAP where the noise is small
#: (``benchmarks/defaults_audit.py``; docs/defaults.md); Srivastava et al.'s 0.5 is meant for
#: networks of thousands of units, such as the mnist suite's. No rate suits every set: on naval,
#: whose residuals are tiny next to the targets' std, even 0.01 stays far below MAP. So ``fit``
#: warns where the rate is not given, and the suites tune it (``Method.tuned_by_default``).
DEFAULT_RATE = 0.01

#: Concrete dropout's initial rate without ``dropout_rate`` (Gal et al.'s code: 0.1).
CONCRETE_INITIAL_RATE = 0.1


@dataclass(frozen=True, kw_only=True)
class MCDropoutOptions(map_estimate.MAPOptions):
    """Options of ``fit(..., method="mcdropout")``: the ``map`` options of the training, then
    dropout's.

    Attributes:
        dropout_rate: :math:`p`, the rate of every dense layer's input, in [0, 1) (0: MAP);
            ``None``: 0.01 (:data:`DEFAULT_RATE`; choose it on a validation split). With
            ``concrete``, every layer's initial rate, in (0, 1) (``None``: 0.1).
        num_draws: :math:`T`, stochastic forward passes (masked copies of the trained weights)
            of the predictive; 1000 as the sampled guides' draws (Gal & Ghahramani used
            10,000 on UCI).
        concrete: Learn each dense layer's rate (concrete dropout).
        temperature: Concrete dropout only: the relaxed masks' temperature (``None``: 0.1,
            Gal et al.'s).
        dropout_regularizer: Concrete dropout only: :math:`\\lambda`, the weight of the
            dropout entropy in the log joint (``None``: 1, its weight in the KL of Gal et al.;
            their code's ``dropout_regularizer`` is :math:`\\lambda / N`).
    """

    dropout_rate: float | None = None
    num_draws: int = 1000
    concrete: bool = False
    temperature: float | None = None
    dropout_regularizer: float | None = None

    @property
    def kept_draws(self) -> int:
        """Draws the result holds: ``num_draws`` masked copies of the weights."""
        return self.num_draws

    def __post_init__(self) -> None:
        super().__post_init__()
        check_bool("concrete", self.concrete)
        if self.dropout_rate is not None:
            rate = self.dropout_rate
            number = not isinstance(rate, bool) and isinstance(
                rate, int | float | np.integer | np.floating
            )
            if not (number and (0.0 < rate < 1.0 or (rate == 0.0 and not self.concrete))):
                interval = "(0, 1) with concrete=True" if self.concrete else "[0, 1)"
                raise ValueError(f"dropout_rate must be in {interval}, got {rate!r}")
        check_positive_int("num_draws", self.num_draws)
        for name in ("temperature", "dropout_regularizer"):
            value = getattr(self, name)
            if value is None:
                continue
            if not self.concrete:
                raise ValueError(f"{name} is an option of concrete dropout: give concrete=True")
            check_positive_float(name, value)
        if self.concrete and self.num_particles != 1:
            raise ValueError(
                f"concrete dropout takes one mask per step: num_particles must be 1, got "
                f"{self.num_particles!r}"
            )
        if self.keep == "lowest" and self.masked:
            raise ValueError(
                "keep='lowest' needs a loss without noise: dropout's masks make each step's "
                "loss a random estimate, whose lowest value is noise; give keep='last'"
            )

    @property
    def masked(self) -> bool:
        """Whether training draws dropout masks (a rate above 0, or concrete dropout)."""
        return self.concrete or self.dropout_rate != 0.0

    def map_options(self, num_data: int) -> map_estimate.MAPOptions:
        """The options of the ``map`` fit behind it on ``num_data`` training points
        (:func:`~ppl_bnn.methods.map_estimate.map_options_of`). With masks (:attr:`masked`)
        its loss is noisy, so where ``map`` would keep the lowest loss it keeps the last
        iterate; early stopping scores the network without masks (weight averaging, the
        usual dropout test-time rule) on held-out points and applies."""
        options = map_estimate.map_options_of(self)
        if self.masked and options.kept_iterate(num_data) == "lowest":
            return replace(options, keep="last")
        return options

    def dropout(self) -> Dropout:
        """The training-time dropout of every dense layer's input."""
        rate = self.dropout_rate
        if not self.concrete:
            return Dropout(float(DEFAULT_RATE if rate is None else rate))
        regularizer = self.dropout_regularizer
        return Dropout(
            float(CONCRETE_INITIAL_RATE if rate is None else rate),
            concrete=True,
            temperature=0.1 if self.temperature is None else float(self.temperature),
            regularizer=1.0 if regularizer is None else float(regularizer),
        )


def masked_draws(
    mode: Mapping[str, np.ndarray],
    rates: Mapping[str, float],
    num_draws: int,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """``num_draws`` copies (1, T, ...) of the trained weights ``mode`` (each (1, 1, ...)), the
    rows of every weight site in ``rates`` kept with probability :math:`1 - p` and scaled by
    :math:`1 / (1 - p)` (a fresh mask per draw), the other sites repeated."""
    draws = {}
    for name, value in mode.items():
        value = np.repeat(np.asarray(value, dtype=np.float32)[:, :1], num_draws, axis=1)
        if name in rates:
            p = rates[name]
            keep = rng.random((num_draws, value.shape[2])) >= p
            scale = (keep / (1.0 - p)).astype(np.float32)
            value = value * scale[None, :, :, None]
        draws[name] = value
    return draws


def run(name: str, target: Target, options: MCDropoutOptions, seed: int) -> RunOutput:
    """``map`` on the model trained with dropout (same seed), then the masked draws."""
    spec = target.spec
    dropout = options.dropout()
    if dropout.concrete and spec.learned_prior is not None:
        raise ValueError(
            "concrete dropout scales the prior's weight decay by 1 / (1 - p) with the prior's "
            "own hyperparameters: give the prior learned=False for concrete=True"
        )
    program = get_backend(target.backend).model(spec, dropout=dropout)
    trained = map_estimate.METHOD.run_on(target.backend)(
        name,
        replace(target, program=program, variant=dropout),
        options.map_options(target.num_data),
        seed,
    )
    if dropout.concrete:
        rates = dict(trained.info["dropout_rates"])
    else:
        rates = {weight: dropout.rate for weight, _ in dense_weights(spec)}
    start = now()
    draws = masked_draws(
        trained.draws, rates, options.num_draws, numpy_generator(seed, f"{name}_masks")
    )
    timings = {**trained.timings, "sampling": trained.timings["sampling"] + (now() - start)}
    info = {
        **trained.info,
        "dropout_rates": rates,
        "mcdropout": {
            "rates": rates,
            "concrete": dropout.concrete,
            "num_draws": options.num_draws,
            "weight_decay": "the prior (MAP on the log joint)",
        },
    }
    if dropout.concrete:
        info["mcdropout"].update(
            initial_rate=dropout.rate,
            temperature=dropout.temperature,
            dropout_regularizer=dropout.regularizer,
        )
    return RunOutput(draws=draws, timings=timings, losses=trained.losses, info=info)


METHOD = Method(
    name="mcdropout",
    summary="MC dropout: a network trained with dropout, predicting with T masked passes",
    options=MCDropoutOptions,
    family=Family.OPTIMISATION,
    needs_mode=True,
    smoke={"num_steps": 30, "num_draws": 5},
    run=run,
    requires=("autoguide",),
    learns_hyperparameters=True,
    tuned_by_default=("dropout_rate", "concrete"),
)
