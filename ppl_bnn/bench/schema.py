"""What suite files of every kind share: the error they raise and the checks of their tables.

Both :mod:`ppl_bnn.bench.suite` (fit suites) and :mod:`ppl_bnn.bench.perf_suite` (performance
suites) validate with these, so a bad file gets the same kind of message whichever it is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from ppl_bnn.bench.cell import MLP_SHORTHAND, model_arguments, network_layers, weight_prior
from ppl_bnn.methods import get_method, make_options
from ppl_bnn.model.priors import prior_from_dict
from ppl_bnn.model.spec import BNNSpec

#: The ``[model]`` keys: :class:`ppl_bnn.BNN` keywords other than the data and likelihood.
MODEL_KEYS = {
    "hidden",
    "activation",
    "prior_scale",
    "fan_in_scaling",
    "prior",
    "noise",
    "noise_prior",
    "layers",
}
#: What :func:`check_model` builds the model spec for: a regression set (noise keys apply).
_REGRESSION = SimpleNamespace(task="regression")


class SuiteError(ValueError):
    """A suite file that cannot be used; the message names the file and the problem."""


def check_keys(where: str, table: Mapping[str, Any], allowed: set[str]) -> None:
    """``SuiteError`` naming the keys of ``table`` that are not in ``allowed``."""
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SuiteError(f"{where}: unknown keys {unknown}; allowed: {sorted(allowed)}")


#: The selection keys of ``Suite.cells(only=...)`` and the command-line flags that set them.
SELECTION_FLAGS = {"dataset": "--datasets", "method": "--methods", "backend": "--backends"}


def check_selection(
    suite: str, only: Mapping[str, Iterable[str]] | None, valid: Mapping[str, set[str]]
) -> None:
    """``SuiteError`` naming every value of ``only`` (``dataset`` / ``method`` / ``backend`` ->
    the values to keep) that is not in ``valid`` for its key, with the valid values: a filter
    that names nothing of suite ``suite`` is a typo, never an empty selection."""
    problems = []
    for key, values in (only or {}).items():
        known = valid.get(key, set())
        unknown = sorted(set(values) - known)
        if unknown:
            flag = SELECTION_FLAGS.get(key, key)
            problems.append(
                f"{flag}: unknown {key} {', '.join(map(repr, unknown))}; "
                f"suite {suite!r} has {', '.join(sorted(known)) or 'none'}"
            )
    if problems:
        raise SuiteError("; ".join(problems))


def check_name(where: str, name: Any) -> str:
    """A suite's name, which names its results folder: a plain file name (not empty, not hidden,
    no path separator, printable)."""
    if (
        not isinstance(name, str)
        or not name
        or name.startswith(".")
        or "/" in name
        or "\\" in name
        or not name.isprintable()
        or len(name.encode()) > 255
    ):
        raise SuiteError(
            f"{where}: name must be a plain file name (it names the results folder: no path "
            f"separator, no leading dot, printable), got {name!r}"
        )
    return name


def check_timeout(where: str, raw: Mapping[str, Any], default: float = 600) -> float:
    """``raw``'s ``timeout_s`` (else ``default`` seconds), which must be a finite positive
    number."""
    timeout = raw.get("timeout_s", default)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise SuiteError(f"{where}: timeout_s must be a finite positive number, got {timeout!r}")
    return float(timeout)


def check_list(where: str, raw: Mapping[str, Any], key: str, default: Sequence[Any]) -> list[Any]:
    """``raw[key]`` (else ``default``): a list without repeated values."""
    values = raw.get(key, default)
    if not isinstance(values, list | tuple):
        raise SuiteError(f"{where}: {key} must be a list, got {values!r}")
    repeated: list[Any] = []
    for value in values:
        if list(values).count(value) > 1 and value not in repeated:
            repeated.append(value)
    if repeated:
        raise SuiteError(f"{where}: {key} must not repeat: {repeated}")
    return list(values)


def check_indices(
    where: str, raw: Mapping[str, Any], key: str, default: Sequence[int]
) -> list[int]:
    """``raw[key]`` (else ``default``): a non-empty list of distinct non-negative integers."""
    values = check_list(where, raw, key, default)
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in values):
        raise SuiteError(f"{where}: {key} must be a non-empty list of non-negative ints")
    return values


def check_model(
    where: str, model: Any, *, image: tuple[tuple[int, ...], int | None] | None = None
) -> dict[str, Any]:
    """``model`` (a ``[model]`` table or an override): known keys whose values build a model
    spec, checked by :meth:`ppl_bnn.model.spec.BNNSpec.mlp` itself on a 1-D input, or, with
    ``layers``, by :class:`~ppl_bnn.model.spec.BNNSpec` on ``image`` (one example's shape and the
    class count, None for regression) where that is known, else layer by layer."""
    if not isinstance(model, Mapping):
        raise SuiteError(f"{where}: must be a table of model settings, got {model!r}")
    check_keys(where, model, MODEL_KEYS)
    if model.get("layers") is not None:
        return _check_layers(where, model, image)
    prior = model.get("noise_prior")
    try:
        if prior is not None and not isinstance(prior, Mapping):
            raise TypeError(f"got {prior!r}")
        if prior is not None:
            prior_from_dict(dict(prior))
    except (TypeError, ValueError) as err:
        raise SuiteError(
            f'{where}: noise_prior must be a prior table, e.g. {{ kind = "gamma", '
            f"concentration = 6.0, rate = 6.0 }}: {err}"
        ) from err
    if model.get("prior") is not None:
        both = sorted(k for k in ("prior_scale", "fan_in_scaling") if k in model)
        if both:
            raise SuiteError(f"{where}: give prior or {' and '.join(both)}, not both")
        try:
            weight_prior(model["prior"])
        except (TypeError, ValueError) as err:
            raise SuiteError(
                f'{where}: prior must be a prior table, e.g. {{ kind = "scale_mixture", '
                f"pi = 0.2, sigma1 = 1.0, sigma2 = 0.1 }}, or one per layer: {err}"
            ) from err
    try:
        kwargs = model_arguments(model, _REGRESSION)
        prior = kwargs.pop("prior", None)
        spec = BNNSpec.mlp(input_dim=1, **kwargs)
        if prior is not None:
            replace(spec, priors=prior)
    except (TypeError, ValueError) as err:
        raise SuiteError(f"{where}: {err}") from err
    return dict(model)


def _check_layers(
    where: str, model: Mapping[str, Any], image: tuple[tuple[int, ...], int | None] | None
) -> dict[str, Any]:
    """A model given by ``layers``: no MLP shorthand beside it, every layer table valid and, on
    a known image shape, the whole network."""
    both = sorted(k for k in MLP_SHORTHAND if k in model)
    if both:
        raise SuiteError(
            f"{where}: layers describes the whole network; drop the MLP shorthand {both}"
        )
    try:
        network_layers(model["layers"])
    except (TypeError, ValueError) as err:
        raise SuiteError(
            f'{where}: layers must be a list of layer tables, e.g. [{{ kind = "conv2d", '
            f'out_channels = 6, kernel_size = 5, padding = "same", activation = "relu" }}, '
            f'{{ kind = "flatten" }}, {{ kind = "dense", units = 10 }}]: {err}'
        ) from err
    if model.get("prior") is not None:
        try:
            weight_prior(model["prior"])
        except (TypeError, ValueError) as err:
            raise SuiteError(
                f"{where}: prior must be a prior table or one per layer: {err}"
            ) from err
    if image is not None:
        shape, classes = image
        task = "regression" if classes is None else "classification"
        data = SimpleNamespace(task=task, num_classes=classes)
        try:
            kwargs = model_arguments(model, data)
            BNNSpec(
                input_shape=shape,
                layers=tuple(kwargs["layers"]),
                priors=kwargs.get("prior", BNNSpec.priors),
                likelihood=kwargs["likelihood"],
                num_classes=classes,
            )
        except (TypeError, ValueError) as err:
            raise SuiteError(f"{where}: layers on inputs of shape {shape}: {err}") from err
    return dict(model)


def check_int(
    where: str, raw: Mapping[str, Any], key: str, default: int, *, minimum: int = 0
) -> int:
    """``raw[key]`` (else ``default``), which must be an integer >= ``minimum``."""
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SuiteError(f"{where}: {key} must be an integer >= {minimum}, got {value!r}")
    return value


def check_positive_number(where: str, raw: Mapping[str, Any], key: str) -> float:
    """``raw[key]``, which must be a finite number > 0."""
    value = raw[key]
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise SuiteError(f"{where}: {key} must be a finite number > 0, got {value!r}")
    return float(value)


def check_open_unit(where: str, raw: Mapping[str, Any], key: str, default: float) -> float:
    """``raw[key]`` (else ``default``), which must be a number strictly between 0 and 1."""
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise SuiteError(f"{where}: {key} must be a number in (0, 1), got {value!r}")
    return float(value)


def check_text(where: str, raw: Mapping[str, Any], key: str) -> str | None:
    """``raw[key]``, which must be a non-empty string, or None when absent."""
    value = raw.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise SuiteError(f"{where}: {key} must be a non-empty string, got {value!r}")
    return value


def check_options(where: str, method: str, backend: str, options: dict[str, Any]) -> None:
    """``SuiteError`` unless ``method`` runs on ``backend`` and accepts every one of ``options``
    there, as :func:`ppl_bnn.fit` will (checked when the suite is read, not in a worker)."""
    try:
        make_options(get_method(method, backend), options, backend=backend)
    except (TypeError, ValueError) as err:
        raise SuiteError(f"{where}: {err}") from err
