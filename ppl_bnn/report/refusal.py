"""Refusing to classify: refusal rates on test, out-of-distribution and uniform-noise inputs, and
the accuracy-vs-coverage curve of selective classification, both computed from the stored
predictions (``test_mean_probs``, ``ood_p_max``, ``noise_p_max``; see
:mod:`ppl_bnn.bench.evaluate`)."""

from __future__ import annotations

import numpy as np

from ppl_bnn import metrics
from ppl_bnn.bench.evaluate import REFUSE_BELOW
from ppl_bnn.report import fmt
from ppl_bnn.report.document import Figure, Inline, Table
from ppl_bnn.report.figures import _grid, _groups, backend_linestyle, figure_of, method_color
from ppl_bnn.report.load import SuiteResults

#: Stored variables the refusal table reads, and the inputs each one scores.
_INPUTS = (("test", "test inputs"), ("ood", "OOD set"), ("noise", "uniform noise"))
#: Coverages of the selective-classification curve.
COVERAGE_POINTS = 50


def _p_max(pred: dict[str, np.ndarray], inputs: str) -> np.ndarray | None:
    """The largest class probability of each ``inputs`` point (test, ood or noise), if stored."""
    if inputs == "test":
        probs = pred.get("test_mean_probs")
        return None if probs is None else np.asarray(probs).max(axis=-1)
    values = pred.get(f"{inputs}_p_max")
    return None if values is None else np.asarray(values)


def refusal_table(results: SuiteResults, dataset: str) -> Table | None:
    """Per (method, backend): the share of test, OOD and uniform-noise inputs whose largest
    predictive probability is below :data:`~ppl_bnn.bench.evaluate.REFUSE_BELOW`, pooled over
    the group's cells; None when no cell stored OOD and noise confidences."""
    rows: list[tuple[Inline, ...]] = []
    variables = ("test_mean_probs", "ood_p_max", "noise_p_max")
    for method, backend, group in _groups(results, dataset):
        pooled: dict[str, list[np.ndarray]] = {name: [] for name, _ in _INPUTS}
        for cell_id in group["cell_id"]:
            pred = results.predictions(cell_id, variables)
            if pred is None or "noise_p_max" not in pred:
                continue
            for name, _ in _INPUTS:
                values = _p_max(pred, name)
                if values is not None:
                    pooled[name].append(values)
        if not pooled["noise"]:
            continue
        shares = [
            fmt.number(100 * float(np.mean(~(np.concatenate(v) >= REFUSE_BELOW))), 3) + "%"
            if v
            else ""
            for v in pooled.values()
        ]
        rows.append((method, backend, str(len(pooled["noise"])), *shares))
    if not rows:
        return None
    header = ("method", "backend", "cells", *(f"refused: {label}" for _, label in _INPUTS))
    caption = (
        f"Refusals: the share of inputs whose largest predictive class probability is below "
        f"{REFUSE_BELOW:g}, on the test set, on the out-of-distribution set and on images of "
        "uniform noise on the inputs' range (same shape, fixed seed), pooled over the cells. A "
        "model that knows what it does not know refuses noise far more often than test inputs."
    )
    return Table(header, tuple(rows), caption, (), (False, False, True, True, True, True))


def selective_figure(results: SuiteResults, dataset: str) -> Figure | None:
    """One panel per method: accuracy on the kept test inputs against the share kept (most
    confident first), one line per backend, averaged over the group's cells."""
    panels: dict[str, list[tuple[str, np.ndarray, np.ndarray]]] = {}
    for method, backend, group in _groups(results, dataset):
        curves = []
        for cell_id in group["cell_id"]:
            pred = results.predictions(cell_id, ("test_mean_probs", "test_y"))
            if pred is None or "test_mean_probs" not in pred or "test_y" not in pred:
                continue
            curve = metrics.selective_curve(
                pred["test_mean_probs"], np.asarray(pred["test_y"]).astype(int), COVERAGE_POINTS
            )
            curves.append(curve)
        if curves:
            coverage = np.asarray(curves[0]["coverage"])
            accuracy = np.mean([c["accuracy"] for c in curves], axis=0)
            panels.setdefault(method, []).append((backend, coverage, accuracy))
    if not panels:
        return None
    fig, axes = _grid(len(panels), ncols=3, sharey=True)
    for ax, (method, lines) in zip(axes, panels.items(), strict=True):
        for backend, coverage, accuracy in lines:
            ax.plot(
                coverage,
                accuracy,
                color=method_color(method),
                ls=backend_linestyle(backend),
                lw=1.3,
                label=backend,
            )
        ax.set(title=method, xlabel="coverage (share of test inputs kept)")
        ax.legend(fontsize=7, frameon=False)
    axes[0].set_ylabel("accuracy on kept inputs")
    caption = (
        "Selective classification: keep the test inputs with the largest predictive class "
        "probability and score them; accuracy of the kept share against the share kept, one "
        "panel per method (mean over cells). A confidence that ranks errors well keeps accuracy "
        "high as coverage falls."
    )
    return figure_of(dataset, "selective", fig, caption)
