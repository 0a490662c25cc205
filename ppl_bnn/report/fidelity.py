"""How close each cell's predictive comes to its split's reference posterior.

Every cell is compared with the reference of its own (dataset, split) (see
:class:`~ppl_bnn.report.reference_entries.ReferenceEntry`), from the stored predictions of both:

- regression: the W2 and KS distances between predictive marginals (Izmailov et al. 2021) on the
  stored fidelity sample of each (:mod:`ppl_bnn.metrics.reference`: at most
  :data:`~ppl_bnn.metrics.reference.FIDELITY_DRAWS` draws of a fit and
  :data:`~ppl_bnn.metrics.reference.FIDELITY_REFERENCE_DRAWS` of the reference, at
  :data:`~ppl_bnn.metrics.reference.FIDELITY_POINTS` evenly spaced test points), and the ratio
  of predictive standard deviations, :math:`\\exp \\overline{\\log(s_n / s^{\\text{ref}}_n)}`
  (geometric mean over test points: above 1 under-confident, below 1 over-confident), also per
  region of the test set where the dataset has them (``_in`` / ``_out``);
- classification: agreement of the most probable class and the total variation between
  predictive class probabilities (Izmailov et al. 2021), on every test point.

A reference without a floor (it failed its gate) still gives numbers; ``ref_passed`` says so and
the report labels them. Beside each distance, :data:`FLOOR_RATIO` is its ratio to the floor of
the cell's own reference (``ref_w2 / floor_w2``, ``ref_tv / floor_tv``; NaN without a floor):
at most 1, the cell cannot be told from the reference.

The distances take a third of a report's time on the default suite, and a sweep renders its
report many times (:mod:`ppl_bnn.report.live`). Each cell's are kept in the results folder
(:data:`MEMO_FILE`), keyed by the size and modification time of its and its reference's
predictions file and by the source of the code that computes them, so that a later render
computes only the cells that are new or changed.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ppl_bnn import metrics
from ppl_bnn.keys import source_key
from ppl_bnn.metrics.reference import (
    FIDELITY_DRAWS,
    FIDELITY_POINTS,
    FIDELITY_REFERENCE_DRAWS,
    evenly,
)
from ppl_bnn.report.load import PREDICTIONS_FILE, SuiteResults
from ppl_bnn.report.memo import CACHE_DIR, file_key, keep

logger = logging.getLogger(__name__)

#: Fidelity columns added to the cells frame.
REGRESSION_COLUMNS = ("ref_w2", "ref_ks", "ref_std_ratio", "ref_std_ratio_in", "ref_std_ratio_out")
CLASSIFICATION_COLUMNS = ("ref_agreement", "ref_tv")
#: A cell's distance (W2, or TV) over its reference's floor.
FLOOR_RATIO = "ref_floor_ratio"
#: The distance each task's floor is measured in.
FLOOR_DISTANCES = ("ref_w2", "ref_tv")
COLUMNS = (*REGRESSION_COLUMNS, *CLASSIFICATION_COLUMNS, FLOOR_RATIO)
_VARIABLES = (
    "test_y", "test_f", "test_sigma", "test_std", "test_mean_probs", "fidelity_f",
    "fidelity_sigma",
)  # fmt: skip
#: Where a results folder keeps its cells' distances (relative to the folder).
MEMO_FILE = CACHE_DIR / "fidelity.json"


def _same_test_set(pred: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> bool:
    if "test_y" not in pred or "test_y" not in ref:
        return False
    y, y_ref = np.asarray(pred["test_y"]), np.asarray(ref["test_y"])
    return y.shape == y_ref.shape and bool(np.allclose(y, y_ref, equal_nan=True))


def _geometric_ratio(std: np.ndarray, ref_std: np.ndarray) -> float:
    with np.errstate(all="ignore"):
        logs = np.log(std) - np.log(ref_std)
    return float(np.exp(np.mean(logs))) if np.all(np.isfinite(logs)) else float("nan")


def _regression(
    pred: dict[str, np.ndarray],
    ref: dict[str, np.ndarray],
    inside: np.ndarray | None,
    ref_quantiles: dict[str, np.ndarray],
) -> dict[str, float]:
    """The regression distances of one cell to its reference (``ref_quantiles``: the
    reference's quantiles, computed at the first cell and kept for the others)."""
    out: dict[str, float] = {}
    sample, ref_sample = _fidelity_sample(pred, FIDELITY_DRAWS), _fidelity_sample(ref, None)
    if sample is not None and ref_sample is not None:
        (f, sigma), (f_ref, sigma_ref) = sample, ref_sample
        with np.errstate(all="ignore"):
            if "q" not in ref_quantiles:
                ref_quantiles["q"] = metrics.reference_quantiles(f_ref, sigma_ref)
            distances = metrics.reference_metrics_regression(
                f, sigma, f_ref, sigma_ref, ref_quantiles["q"]
            )
        out["ref_w2"], out["ref_ks"] = distances["ref_w2"], distances["ref_ks"]
    if "test_std" in pred and "test_std" in ref:
        std, ref_std = pred["test_std"], ref["test_std"]
        out["ref_std_ratio"] = _geometric_ratio(std, ref_std)
        if inside is not None and len(inside) == len(std):
            for suffix, mask in (("in", inside), ("out", ~inside)):
                if mask.any():
                    out[f"ref_std_ratio_{suffix}"] = _geometric_ratio(std[mask], ref_std[mask])
    return out


def _fidelity_sample(
    stored: dict[str, np.ndarray], draws: int | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(f, sigma)`` at the fidelity points, evenly thinned to at most ``draws`` draws (None:
    :data:`~ppl_bnn.metrics.reference.FIDELITY_REFERENCE_DRAWS`): the stored fidelity sample,
    or for predictions stored before there was one, their test draws at the same points."""
    keep = FIDELITY_REFERENCE_DRAWS if draws is None else draws
    if "fidelity_f" in stored:
        f, sigma = stored["fidelity_f"], stored["fidelity_sigma"]
    elif "test_f" in stored:
        points = evenly(stored["test_f"].shape[-1], FIDELITY_POINTS)
        f, sigma = stored["test_f"][:, points], stored["test_sigma"]
    else:
        return None
    kept = evenly(f.shape[0], keep)
    return f[kept], sigma[kept]


def _test_inside(results: SuiteResults, cell_id: str) -> np.ndarray | None:
    """The cell's in-region mask, from its stored predictions (None without regions)."""
    pred = results.predictions(cell_id, ("test_inside",))
    if not pred or "test_inside" not in pred:
        return None
    return np.asarray(pred["test_inside"]).astype(bool)


def _code_key() -> str:
    """A hash of the source that computes the distances: a change to it forgets the memo."""
    modules = (metrics.reference, metrics.regression, metrics.classification)
    return source_key([*(Path(m.__file__) for m in modules), Path(__file__)])


class _Memo:
    """The distances of earlier renders (:data:`MEMO_FILE`), by cell id and input key."""

    def __init__(self, results_dir: Path) -> None:
        self.path = results_dir / MEMO_FILE
        self.code = _code_key()
        try:
            stored = json.loads(self.path.read_text())
        except (OSError, ValueError):
            stored = {}
        valid = isinstance(stored, dict) and stored.get("code") == self.code
        self.stored: dict[str, Any] = stored.get("cells", {}) if valid else {}
        self.used: dict[str, Any] = {}

    def get(self, cell_id: str, key: list) -> dict[str, float] | None:
        entry = self.stored.get(cell_id)
        if isinstance(entry, dict) and entry.get("key") == key:
            self.used[cell_id] = entry
            return dict(entry["row"])
        return None

    def put(self, cell_id: str, key: list, row: dict[str, float]) -> None:
        self.used[cell_id] = {"key": key, "row": row}

    def save(self) -> None:
        """Keep the entries of this render's cells; a folder that cannot be written is left as
        it is (the next render computes them again)."""
        if self.used == self.stored:
            return
        keep(self.path, json.dumps({"code": self.code, "cells": self.used}), "fidelity")


def _distances(
    results: SuiteResults,
    cell_id: str,
    ref: dict[str, np.ndarray],
    ref_quantiles: dict[str, np.ndarray],
) -> dict[str, float] | None:
    """One cell's distances to its reference, None when they cannot be computed."""
    pred = results.predictions(cell_id, _VARIABLES)
    if pred is None:
        return None
    if not _same_test_set(pred, ref):
        logger.warning("%s: test set differs from its reference's", cell_id)
        return None
    if "test_mean_probs" in pred and "test_mean_probs" in ref:
        p, q = pred["test_mean_probs"], ref["test_mean_probs"]
        return {"ref_agreement": metrics.agreement(p, q), "ref_tv": metrics.total_variation(p, q)}
    return _regression(pred, ref, _test_inside(results, cell_id), ref_quantiles)


def fidelity_frame(results: SuiteResults) -> pd.DataFrame:
    """One row per cell with metrics that has a usable reference on its (dataset, split):
    ``cell_id``, the distances of :data:`COLUMNS` that apply, the ratio to the floor and
    ``ref_passed``."""
    cells = results.cells
    if cells.empty or not results.references:
        return pd.DataFrame(columns=["cell_id", *COLUMNS, "ref_passed"])
    memo = _Memo(results.results_dir)
    rows: list[dict[str, Any]] = []
    with_metrics = cells[cells["status"].isin(("ok", "diverged"))]
    for (dataset, split), group in with_metrics.groupby(["dataset", "split"], sort=False):
        entry = results.references.get((dataset, int(split)))
        if entry is None or not entry.usable:
            continue
        ref_key = file_key(entry.folder / PREDICTIONS_FILE)
        ref: dict[str, np.ndarray] | None = None  # read at the first cell not in the memo
        ref_quantiles: dict[str, np.ndarray] = {}  # the same for every cell of the split
        for cell_id in group["cell_id"]:
            path = results.file_path(cell_id, "predictions")
            if path is None:
                continue
            key = [file_key(path), ref_key]
            distances = memo.get(cell_id, key) if None not in key else None
            if distances is None:
                ref = ref or results.reference_predictions(dataset, split, _VARIABLES)
                if ref is None:
                    break
                distances = _distances(results, cell_id, ref, ref_quantiles)
                if distances is None:
                    continue
                if None not in key:
                    memo.put(cell_id, key, {k: float(v) for k, v in distances.items()})
            ratio = _floor_ratio(distances, entry.floor)
            rows.append({"cell_id": cell_id, "ref_passed": bool(entry.passed), **distances,
                         FLOOR_RATIO: ratio})  # fmt: skip
    memo.save()
    return pd.DataFrame(rows, columns=["cell_id", *COLUMNS, "ref_passed"])


def _floor_ratio(distances: dict[str, float], floor: float | None) -> float:
    """The distance the floor is measured in over the floor; NaN without a floor."""
    distance = next((distances[k] for k in FLOOR_DISTANCES if k in distances), float("nan"))
    if floor is None or not floor > 0:
        return float("nan")
    return float(distance) / floor


def with_fidelity(results: SuiteResults) -> SuiteResults:
    """``results`` with the fidelity columns joined onto its cells frame (computed once)."""
    frame = fidelity_frame(results)
    cells = results.cells.drop(columns=[c for c in frame.columns[1:] if c in results.cells])
    results.cells = cells.merge(frame, on="cell_id", how="left")
    for column in COLUMNS:
        results.cells[column] = results.cells[column].astype(float)
    return results
