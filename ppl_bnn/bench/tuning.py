"""Settings chosen on a validation split carved from each training set, as the baselines' papers
chose them (Gal & Ghahramani 2016's UCI protocol).

A suite's ``[methods.<name>.tune]`` table (or a dataset's ``options = { <name> = { tune = ...
} }``) adds a tuned contestant beside the untuned one::

    [methods.map.tune]
    grid = { noise = [0.3, 0.5, 1.0], prior_scale = [0.3, 1.0], num_steps = [1000, 4000] }
    validation_fraction = 0.2            # the default

A grid key is an option of the method (a field of its options class) or one of
:data:`MODEL_KEYS`: ``noise``, a known noise std in the model's standardised target units, and
``prior_scale``, the weights' prior std (MAP's weight decay ``1 / (2 prior_scale^2)``). A tuned
``noise`` replaces learned noise and its ``noise_prior``; its grid may also hold ``"learned"``
(:data:`LEARNED`), which keeps the suite's learned noise, so that the validation split chooses
between learning the noise and fixing it.

A tuned cell (:func:`tune`) holds out ``validation_fraction`` of its training set
(:func:`ppl_bnn.data.validation.validation_split`, seeded by the cell's seed and split), fits
every combination of the grid on the rest, scores each by the mean validation log predictive
density

.. math:: \\frac1{N_v} \\sum_n \\log \\frac1S \\sum_s p(y_n \\mid x_n, \\theta_s)

(in original units for regression), and keeps the best (the first on a tie). The cell then
fits the whole training set with those settings and is evaluated on its test set as any cell:
the test set is never seen while choosing. A combination that breaks down (a
:class:`~ppl_bnn.methods.base.DivergedError`, a divergence the fit reports, a non-finite
score) scores -inf; when every one does, the cell fails.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ppl_bnn.bench.cell import Cell, model_arguments
from ppl_bnn.bench.schema import SuiteError, check_keys, check_model, check_options
from ppl_bnn.data import Dataset
from ppl_bnn.data.validation import ValidationSplit, validation_split
from ppl_bnn.fit import fit
from ppl_bnn.methods import METHODS, shared
from ppl_bnn.methods.base import DivergedError, HessianError
from ppl_bnn.metrics.regression import log_predictive_density
from ppl_bnn.model.bnn import BNN
from ppl_bnn.seeding import numpy_generator
from ppl_bnn.timing import now

logger = logging.getLogger(__name__)

#: The grids ``compare(..., tune="auto")`` tunes a method on, for each method whose default does
#: not hold on every set (``Method.tuned_by_default``): MC dropout's rates, from the uci suite's
#: smallest (naval's residuals need next to no dropout) to the default suite's 0.2.
TUNING_GRIDS: dict[str, dict[str, tuple[float, ...]]] = {
    "mcdropout": {"dropout_rate": (1e-4, 1e-3, 0.01, 0.05, 0.2)},
}

#: Grid keys that set the model, not the method: a known noise std, the weights' prior std.
MODEL_KEYS = ("noise", "prior_scale")
#: Most combinations a grid may have (each is a fit before the cell's own).
MAX_COMBINATIONS = 64
#: Share of each training set held out for validation (Gal & Ghahramani 2016: 20%).
DEFAULT_VALIDATION_FRACTION = 0.2
_TUNE_KEYS = {"grid", "validation_fraction"}
#: The one grid value that is not a number: ``noise = ["learned", 0.3]`` tries the model's learned
#: noise (with its ``noise_prior``) beside the known stds.
LEARNED = "learned"


class TuningError(RuntimeError):
    """Every combination of a tuned cell's grid broke down: no setting to refit with."""


@dataclass(frozen=True)
class Tuning:
    """A grid of settings and the share of the training set held out to choose among them.

    Attributes:
        grid: Setting name -> the values tried, in the suite's order.
        validation_fraction: Share of each training set held out, in (0, 1).
    """

    grid: dict[str, tuple[float | str, ...]]
    validation_fraction: float = DEFAULT_VALIDATION_FRACTION

    def combinations(self) -> list[dict[str, float | str]]:
        """Every combination of the grid, the last key varying fastest."""
        keys = list(self.grid)
        return [
            dict(zip(keys, values, strict=True))
            for values in itertools.product(*self.grid.values())
        ]

    def to_dict(self) -> dict[str, Any]:
        """The plain form a :class:`~ppl_bnn.bench.cell.Cell` carries (``tune``)."""
        return {
            "grid": {k: list(v) for k, v in self.grid.items()},
            "validation_fraction": self.validation_fraction,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Tuning:
        return cls(
            grid={str(k): tuple(v) for k, v in data["grid"].items()},
            validation_fraction=float(data["validation_fraction"]),
        )


def _method_fields(method: str) -> list[str]:
    """The option names of ``method`` (its options class's init fields)."""
    found = [m for m in METHODS if m.name == method]
    if not found:
        raise SuiteError(f"unknown method {method!r}")
    return [f.name for f in fields(found[0].options) if f.init]


def parse_tuning(where: str, raw: Any, method: str) -> Tuning:
    """A ``tune`` table of ``method``: a non-empty ``grid`` of known setting names, each with a
    non-empty list of distinct finite numbers, at most :data:`MAX_COMBINATIONS` combinations,
    and a ``validation_fraction`` in (0, 1). Each combination is checked against the method's
    options class and the model with the rest of the suite (:func:`check_tuned_cell`)."""
    if not isinstance(raw, Mapping):
        raise SuiteError(
            f"{where}: tune must be a table such as {{ grid = {{ noise = [0.3, 1.0] }}, "
            f"validation_fraction = 0.2 }}, got {raw!r}"
        )
    check_keys(where, raw, _TUNE_KEYS)
    grid = raw.get("grid")
    if not isinstance(grid, Mapping) or not grid:
        raise SuiteError(
            f"{where}: grid must be a non-empty table of settings and the values to try, e.g. "
            f"{{ noise = [0.3, 1.0], num_steps = [1000, 4000] }}, got {grid!r}"
        )
    valid = [*MODEL_KEYS, *_method_fields(method)]
    unknown = sorted(k for k in grid if k not in valid)
    if unknown:
        raise SuiteError(
            f"{where}: grid keys {unknown} are neither model settings {list(MODEL_KEYS)} nor "
            f"options of {method!r} ({', '.join(valid[len(MODEL_KEYS) :])})"
        )
    parsed: dict[str, tuple[float | str, ...]] = {}
    for key, values in grid.items():
        allowed = f'finite numbers or "{LEARNED}"' if key == "noise" else "finite numbers"
        if (
            not isinstance(values, list)
            or not values
            or any(not _grid_value(key, v) for v in values)
        ):
            raise SuiteError(
                f"{where}: grid {key} must be a non-empty list of {allowed}, got {values!r}"
            )
        if len(set(values)) < len(values):
            raise SuiteError(f"{where}: grid {key} repeats a value: {values!r}")
        parsed[str(key)] = tuple(values)
    count = math.prod(len(v) for v in parsed.values())
    if count > MAX_COMBINATIONS:
        raise SuiteError(
            f"{where}: grid has {count} combinations, more than {MAX_COMBINATIONS} (each is a "
            "fit before the cell's own, within the cell's timeout); try fewer values"
        )
    fraction = raw.get("validation_fraction", DEFAULT_VALIDATION_FRACTION)
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 < fraction < 1:
        raise SuiteError(
            f"{where}: validation_fraction must be a number in (0, 1), got {fraction!r}"
        )
    return Tuning(parsed, float(fraction))


def _grid_value(key: str, value: Any) -> bool:
    """Whether ``value`` may stand in grid ``key``'s list: a finite number, or, for ``noise``,
    :data:`LEARNED`."""
    if key == "noise" and value == LEARNED:
        return True
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def split_settings(settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A combination's model settings (:data:`MODEL_KEYS`) and method options, apart."""
    model = {k: v for k, v in settings.items() if k in MODEL_KEYS}
    return model, {k: v for k, v in settings.items() if k not in MODEL_KEYS}


def apply_settings(
    cell: Cell, settings: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The cell's model and options with a combination's values in place of its own; a tuned
    ``noise`` is known, so the model's ``noise_prior`` (for learned noise) is dropped, unless it
    is :data:`LEARNED`."""
    model, options = split_settings(settings)
    known = model.get("noise", LEARNED) != LEARNED
    base = {k: v for k, v in cell.model.items() if not (known and k == "noise_prior")}
    return {**base, **model}, {**cell.options, **options}


def check_tuned_cell(where: str, cell: Cell, regression: bool | None) -> None:
    """``SuiteError`` unless every combination of ``cell``'s grid makes a valid model and valid
    options for its method and backend; ``noise`` needs a regression set (``regression``:
    whether the cell's set is one, None when unknown before its data is read)."""
    tuning = Tuning.from_dict(cell.tune or {})
    if "noise" in tuning.grid and regression is False:
        raise SuiteError(
            f"{where}: grid noise sets a Gaussian noise std, but {cell.dataset} is a "
            "classification set; give this dataset its own tune table without noise, or "
            f'exclude "{cell.method}.tuned"'
        )
    for settings in tuning.combinations():
        model, options = apply_settings(cell, settings)
        check_model(f"{where} tuned with {settings}", model)
        check_options(f"{where} tuned with {settings}", cell.method, cell.backend, options)


@dataclass
class Tuned:
    """What tuning chose for a cell and how it got there.

    Attributes:
        model, options: The cell's model and options with the chosen settings in place.
        info: ``grid``, ``validation_fraction``, ``n_fit`` and ``n_validation``, ``scores`` (one
            entry per combination: ``settings``, ``score`` (-inf where it broke down),
            ``status``, ``error``, ``seconds``, and ``compile``, the fit's compile seconds,
            where it ran to its end), ``chosen``, ``seconds`` (the whole tuning)
            and ``shared_seconds`` (the part of it that producing runs read from the shared-fit
            store took, :mod:`ppl_bnn.bench.fit_store`); stored as the record's
            ``info["tuning"]``.
    """

    model: dict[str, Any]
    options: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return float(self.info["seconds"])


def validation_score(result: Any, data: Dataset) -> float:
    """Mean log predictive density of ``data``'s test set (here: the validation part) under
    ``result``, in original units for regression; -inf where any point's is not finite."""
    pred = result.predict(data.x_test)
    with np.errstate(all="ignore"):
        if data.task == "regression":
            f = np.asarray(pred.f, dtype=np.float64)[..., 0] * data.y_std + data.y_mean
            sigma = np.asarray(pred.noise_std, dtype=np.float64) * data.y_std
            points = log_predictive_density(f, sigma, data.y_test * data.y_std + data.y_mean)
        else:
            probs = np.asarray(pred.draws, dtype=np.float64)
            picked = probs[:, np.arange(data.n_test), data.y_test]
            points = np.log(picked.mean(axis=0))
    score = float(np.mean(points))
    return score if math.isfinite(score) else -math.inf


def reports_divergence(info: Mapping[str, Any]) -> bool:
    """Whether a fit's ``info`` says it broke down (but kept finite draws: SG-MCMC draws before
    the divergence, the ensemble members that stayed finite)."""
    at = info.get("diverged_at_step")
    return bool(info.get("diverged") or isinstance(at, int) or info.get("members_diverged"))


def tuning_split(cell: Cell, data: Dataset) -> ValidationSplit:
    """The validation split ``cell`` chooses its settings on: ``validation_fraction`` of
    ``data``'s training set, drawn from a stream seeded by the cell's seed and split (the same
    on every backend, so both backends choose on the same points)."""
    if cell.tune is None:
        raise ValueError(f"{cell.cell_id} has no tuning grid")
    rng = numpy_generator(cell.seed, f"tuning validation split {cell.split}")
    return validation_split(data, Tuning.from_dict(cell.tune).validation_fraction, rng)


def tune(
    cell: Cell,
    data: Dataset,
    *,
    fit_fn: Callable[..., Any] | None = None,
) -> Tuned:
    """Choose ``cell``'s settings from its grid on a validation split of ``data``'s training
    set (never its test set); see the module docstring.

    Args:
        cell: A cell with ``tune`` set.
        data: The cell's loaded split.
        fit_fn: What fits (default :func:`ppl_bnn.fit`).

    Raises:
        ValueError: The cell has no grid, or ``noise`` is tuned on a classification set.
        TuningError: Every combination broke down.
    """
    if cell.tune is None:
        raise ValueError(f"{cell.cell_id} has no tuning grid")
    fit_fn = fit if fit_fn is None else fit_fn
    tuning = Tuning.from_dict(cell.tune)
    if "noise" in tuning.grid and data.task != "regression":
        raise ValueError(f"{cell.cell_id}: noise is tuned, but {data.name} is a classification set")
    start = now()
    carved = tuning_split(cell, data).data
    scores = []
    with shared.collect() as reused:
        for settings in tuning.combinations():
            scores.append(_score(cell, carved, settings, fit_fn))
            logger.info("%s: %s scored %s", cell.cell_id, settings, scores[-1]["score"])
    shared_s = sum(run["seconds"] for run in reused)
    best = max(range(len(scores)), key=lambda i: (scores[i]["score"], -i))
    if scores[best]["score"] == -math.inf:
        errors = "; ".join(f"{s['settings']}: {s['error']}" for s in scores)
        raise TuningError(
            f"{cell.cell_id}: every combination of the tuning grid broke down on the "
            f"validation split, so there is no setting to refit with ({errors})"
        )
    chosen = scores[best]["settings"]
    model, options = apply_settings(cell, chosen)
    info = {
        **tuning.to_dict(),
        "n_fit": carved.n_train,
        "n_validation": carved.n_test,
        "score": "mean validation log predictive density",
        "scores": scores,
        "chosen": chosen,
        # Runs read from the shared-fit store count as if they had been run here.
        "seconds": now() - start + shared_s,
        "shared_seconds": shared_s,
    }
    return Tuned(model=model, options=options, info=info)


def _score(
    cell: Cell, carved: Dataset, settings: dict[str, Any], fit_fn: Callable[..., Any]
) -> dict[str, Any]:
    """Fit one combination on the fit part of ``carved`` and score it on its validation part."""
    model_cfg, options = apply_settings(cell, settings)
    start = now()
    entry: dict[str, Any] = {"settings": settings, "status": "ok", "error": None}
    result = None
    try:
        model = BNN(carved.x_train, carved.y_train, **model_arguments(model_cfg, carved))
        result = fit_fn(model, cell.method, backend=cell.backend, seed=cell.seed, **options)
        score = validation_score(result, carved)
        if reports_divergence(result.info):
            entry.update(status="diverged", error="the fit reports a divergence")
            score = -math.inf
        elif score == -math.inf:
            entry.update(status="diverged", error="non-finite validation log predictive density")
    except (DivergedError, HessianError) as err:
        entry.update(status="diverged", error=f"{type(err).__name__}: {err}")
        score = -math.inf
    entry.update(score=score, seconds=now() - start)
    if result is not None:  # what producing the shared runs it read cost counts as its own
        entry["seconds"] += result.timings.get("shared", 0.0)
        entry["compile"] = result.timings["compile"]
    return entry


#: The contestants of a tuned method an ``exclude`` may name: ``method.tuned``, ``method.untuned``.
CONTESTANTS = ("tuned", "untuned")


def dataset_tuning(
    loc: str,
    methods: Mapping[str, Any],
    exclude: list[str],
    options: Mapping[str, Any],
    sweep: object | None,
) -> dict[str, Tuning]:
    """The grid of each method that runs tuned on this dataset: its ``[methods.<name>.tune]``
    updated key by key by the dataset's ``options = { <name> = { tune = ... } }``, unless
    ``exclude`` names ``<name>.tuned`` or the dataset is a study (``sweep``)."""
    for key, table in options.items():
        if "." in key and "tune" in table:
            raise SuiteError(
                f"{loc}: options {key!r} set tune; a dataset tunes a method on every backend "
                f"(options = {{ {key.partition('.')[0]} = {{ tune = ... }} }})"
            )
    if sweep is not None:
        if any("tune" in table for table in options.values()):
            raise SuiteError(f"{loc}: a study (sweep) is not tuned; drop tune from its options")
        return {}
    out = {}
    for method, table in methods.items():
        given = options.get(method, {}).get("tune")
        if given is not None and not isinstance(given, Mapping):
            raise SuiteError(f"{loc}: options {method!r} tune must be a table, got {given!r}")
        if table.get("tune") is None and given is None:
            for contestant in CONTESTANTS:
                if f"{method}.{contestant}" in exclude:
                    raise SuiteError(
                        f"{loc}: exclude names {method}.{contestant}, but {method!r} is not "
                        "tuned here"
                    )
            continue
        if f"{method}.tuned" in exclude or method in exclude:
            if f"{method}.untuned" in exclude:
                raise SuiteError(
                    f"{loc}: exclude names both {method}.tuned and {method}.untuned: "
                    f"exclude {method!r} instead"
                )
            continue
        raw = {**(table.get("tune") or {}), **(given or {})}
        out[method] = parse_tuning(f"{loc} {method} tune", raw, method)
    return out
