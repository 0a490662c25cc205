"""``BNN``: a :class:`~ppl_bnn.model.spec.BNNSpec` bound to checked training data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Literal

import numpy as np

from ppl_bnn.engine.registry import DEFAULT_BACKEND, get_backend
from ppl_bnn.model.checks import check_inputs, check_params, check_targets
from ppl_bnn.model.layers import Layer
from ppl_bnn.model.priors import Prior
from ppl_bnn.model.spec import DEFAULT_PRIOR, BNNSpec
from ppl_bnn.model.targets import class_indices, model_targets
from ppl_bnn.seeding import numpy_generator

#: The MLP shorthand's defaults; ``layers=`` replaces them, so they must be left as they are.
_MLP_DEFAULTS = {"hidden": (50,), "activation": "tanh", "prior_scale": 1.0, "fan_in_scaling": False}
#: The names of a held-out pair's inputs and labels in errors, by what it is for.
HELD_OUT_NAMES = {"validation": ("x_val", "y_val"), "test": ("x_test", "y_test")}


class BNN:
    """A Bayesian neural network: the spec plus its training data.

    The network is either given layer by layer (``layers=[Dense(50, "relu"), Dense(1)]``, the last
    layer's width being the output width, with ``prior=`` for the weights and biases) or, as
    shorthand for an MLP, by ``hidden``, ``activation``, ``prior_scale`` and ``fan_in_scaling``
    (see :meth:`BNNSpec.mlp <ppl_bnn.model.spec.BNNSpec.mlp>`).

    Args:
        x: Inputs, finite: shape (N, D), or images (N, H, W, C) (channels last; give
            ``layers=`` starting with :class:`~ppl_bnn.layers.Conv2d`, pooling or
            :class:`~ppl_bnn.layers.Flatten`).
        x, y: Arrays, lists, or pandas DataFrames and Series.
        y: Targets, shape (N,): numbers for ``likelihood="gaussian"``; for ``"categorical"``,
            integer labels 0..K-1 (K is ``num_classes`` or, by default, ``max(y) + 1``) or labels
            of any kind (strings, booleans), which become class indices in sorted order
            (:attr:`classes`).
        hidden, activation, prior_scale, fan_in_scaling: The MLP shorthand.
        likelihood, noise, num_classes: See :class:`~ppl_bnn.model.spec.BNNSpec`. Without
            ``likelihood``, a given ``noise`` means regression, a given ``num_classes``
            classification, and otherwise ``y`` decides: floats are a regression target;
            integers, booleans and strings are class labels (:mod:`ppl_bnn.model.targets`).
            Regression learns its noise unless ``noise`` is given.
        noise_prior: ``noise="learned"`` only: the prior on the noise precision (default
            Gamma(1, 0.1), which lets the noise shrink to the residuals; PBP's Gamma(6, 6) is
            ``ppl_bnn.priors.PBP_NOISE_PRIOR``; see :class:`~ppl_bnn.model.spec.BNNSpec`).
        layers: The layers from input to output (:mod:`ppl_bnn.layers`), instead of the shorthand.
        prior: One prior (:mod:`ppl_bnn.priors`: ``Normal``, ``ScaleMixture``) for every weight
            and bias, or one per parametrised layer; with the shorthand it replaces
            ``prior_scale``. A ``ScaleMixture(learned=True)`` is fitted with the optimisation
            methods (one set of hyperparameters for every layer that carries it).

    Example:
        >>> import numpy as np
        >>> from ppl_bnn import BNN, layers, priors
        >>> x = np.linspace(-1, 1, 20)[:, None]
        >>> model = BNN(x, np.sin(3 * x[:, 0]), hidden=(10,), noise=0.1)
        >>> sorted(model.init_params(seed=0))
        ['b0', 'b1', 'w0', 'w1']
        >>> same = BNN(x, np.sin(3 * x[:, 0]), layers=[layers.Dense(10, "tanh"), layers.Dense(1)],
        ...            prior=priors.Normal(1.0), noise=0.1)
        >>> same.spec == model.spec
        True
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
        likelihood: Literal["gaussian", "categorical"] | None = None,
        noise: float | Literal["learned"] | None = None,
        num_classes: int | None = None,
        layers: Sequence[Layer] | None = None,
        prior: Prior | Sequence[Prior] | None = None,
        noise_prior: Prior | None = None,
    ) -> None:
        x_arr = check_inputs(x)
        targets = model_targets(y, likelihood=likelihood, noise=noise, num_classes=num_classes)
        likelihood, noise = targets.likelihood, targets.noise
        y_arr = check_targets(targets.y, x_arr.shape[0], likelihood, num_classes)
        if likelihood == "categorical" and num_classes is None:
            num_classes = max(int(y_arr.max()) + 1, len(targets.classes or ()))
        shorthand = {
            "hidden": hidden,
            "activation": activation,
            "prior_scale": prior_scale,
            "fan_in_scaling": fan_in_scaling,
        }
        if layers is None:
            if x_arr.ndim != 2:
                raise ValueError(
                    f"the MLP shorthand (hidden=...) takes flat inputs (N, D), got x of shape "
                    f"{x_arr.shape}; describe the network with layers=[...] (ppl_bnn.layers: "
                    "Conv2d, MaxPool2d, AvgPool2d, Flatten, Dense)"
                )
            if prior is not None and (prior_scale, fan_in_scaling) != (1.0, False):
                raise ValueError("give prior= or prior_scale=/fan_in_scaling=, not both")
            spec = BNNSpec.mlp(
                input_dim=x_arr.shape[1],
                likelihood=likelihood,
                noise=noise,
                num_classes=num_classes,
                noise_prior=noise_prior,
                **shorthand,
            )
            if prior is not None:
                spec = replace(spec, priors=prior)
        else:
            changed = sorted(k for k, v in shorthand.items() if _differs(v, _MLP_DEFAULTS[k]))
            if changed:
                raise ValueError(
                    f"layers= describes the whole network; drop the MLP shorthand {changed}"
                )
            spec = BNNSpec(
                input_shape=x_arr.shape[1:],
                layers=layers,
                priors=DEFAULT_PRIOR if prior is None else prior,
                likelihood=likelihood,
                noise=noise,
                num_classes=num_classes,
                noise_prior=noise_prior,
            )
        self.spec = spec
        self.x = x_arr
        self.y = y_arr
        #: The label of each class index where ``y`` held labels other than integers, else None.
        self.classes = targets.classes
        #: The input columns' names where ``x`` was a DataFrame, else None.
        self.feature_names = _column_names(x, x_arr)

    @classmethod
    def from_spec(cls, spec: BNNSpec, x: object, y: object) -> BNN:
        """Bind an existing spec to data (checked against it)."""
        x_arr = check_inputs(x, spec.input_shape)
        model = cls.__new__(cls)
        model.spec = spec
        model.x = x_arr
        model.y = check_targets(y, x_arr.shape[0], spec.likelihood, spec.num_classes)
        model.classes = None
        model.feature_names = _column_names(x, x_arr)
        return model

    @property
    def num_data(self) -> int:
        return int(self.x.shape[0])

    def held_out(self, pair: object, what: str = "validation") -> tuple[np.ndarray, np.ndarray]:
        """A held-out pair ``(x, y)`` checked as the training data are (input shape, likelihood,
        classes), its labels read through :attr:`classes` where the model's data had labels
        other than integers. ``what`` names it in errors: ``"validation"`` (``x_val``,
        ``y_val``) or ``"test"`` (``x_test``, ``y_test``).

        Raises:
            TypeError: ``pair`` is not a pair.
            ValueError: the inputs or labels do not fit the model (named as above), or a label
                the model's data did not have.
        """
        x_name, y_name = HELD_OUT_NAMES[what]
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise TypeError(
                f"{what} must be a pair ({x_name}, {y_name}), got {type(pair).__name__}"
            )
        spec = self.spec
        x = check_inputs(pair[0], spec.input_shape, name=x_name)
        labels = pair[1]
        if self.classes is not None:
            labels = class_indices(labels, self.classes, name=y_name)
        y = check_targets(labels, x.shape[0], spec.likelihood, spec.num_classes, name=y_name)
        return x, y

    def __repr__(self) -> str:
        return f"BNN(n={self.num_data}, spec={self.spec!r})"

    def init_params(self, seed: int) -> dict[str, np.ndarray]:
        """One draw from the prior, as float32 numpy arrays keyed by site name (a site under a
        hierarchical prior drawn given the draws of its latent sites)."""
        rng = numpy_generator(seed, "init_params")
        params: dict[str, np.ndarray] = {}
        for site in self.spec.sites():
            draw = site.prior_given(params).sample(rng, site.shape)
            params[site.name] = np.asarray(draw, dtype=np.float32)
        return params

    def check_params(self, params: Mapping[str, object]) -> dict[str, np.ndarray]:
        """``params`` checked against the spec's sites (names, shapes, finiteness, support)."""
        return check_params(self.spec, params)

    def log_density(self, params: Mapping[str, object], backend: str = DEFAULT_BACKEND) -> float:
        """Log joint ``log p(theta) + sum_i log p(y_i | x_i, theta)``, by ``backend``'s model."""
        impl = get_backend(backend)
        checked = self.check_params(params)
        x, y = impl.data(self.spec, self.x, self.y)
        return impl.log_density(self.spec, x, y, checked)

    def grad_log_density(
        self, params: Mapping[str, object], backend: str = DEFAULT_BACKEND
    ) -> dict[str, np.ndarray]:
        """Gradient of :meth:`log_density` with respect to every site."""
        impl = get_backend(backend)
        checked = self.check_params(params)
        x, y = impl.data(self.spec, self.x, self.y)
        return impl.grad_log_density(self.spec, x, y, checked)


def _column_names(x: object, x_arr: np.ndarray) -> tuple[str, ...] | None:
    """A DataFrame's column names, as strings, for flat inputs; None otherwise."""
    columns = getattr(x, "columns", None)
    if columns is None or x_arr.ndim != 2:
        return None
    return tuple(str(c) for c in columns)


def _differs(value: object, default: object) -> bool:
    """Whether a shorthand argument was changed from its default (sequences compared as tuples)."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        value = tuple(value)
    return value != default
