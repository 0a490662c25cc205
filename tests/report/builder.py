"""Write a tiny, schema-valid suite results folder from real fits (no runner needed).

Cells: a 1-D regression set ``sine`` (svi on Pyro, map on both backends, a 3-member ensemble and
NUTS with two chains on NumPyro; a failed Pyro NUTS cell with a budget note, a diverged SGLD cell
without files, and a second split of svi.pyro with known metrics) and a 3-class set ``blobs``
(svi on Pyro, splits 0 and 1). A study, ``sine/beta``: svi's ``kl_weight`` swept over
:data:`STUDY_BETAS` on both backends, its predictions written by hand (no fit; the one at the
smallest beta on Pyro failed). The map cell on Pyro is flagged as unusable. Sine's test set is
split into two regions (``|x| <= 0.5`` "near zero", the rest "far"). References (``reference.json``
format 2, written by :func:`ppl_bnn.reference.reference_document`, so through its gate): sine
split 0 has a short NUTS reference of two chains (seed 1), judged by
:func:`ppl_bnn.reference.chains.assess_chains`, which has no floor (fewer than 4 chains kept);
blobs split 0 an SVI stand-in whose 50 draws are cut into pseudo-chains (6 run, one dropped as
frozen, 5 kept) with a real floor from :func:`ppl_bnn.reference.chains.floor`; blobs split 1
is infeasible. Metrics are computed here by hand, so the report is tested against numbers it
did not produce.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from scipy.special import logsumexp
from scipy.stats import norm

from ppl_bnn import BNN, FitResult, fit, metrics
from ppl_bnn.bench.cell import Cell
from ppl_bnn.bench.evaluate import _fidelity_sample
from ppl_bnn.bench.record import IDATA_FILE, PREDICTIONS_FILE, RECORD_FILE, write_record
from ppl_bnn.data.synthetic import sine_function
from ppl_bnn.metrics import sampler_diagnostics
from ppl_bnn.metrics.reference import (
    FIDELITY_DRAWS,
    FIDELITY_REFERENCE_DRAWS,
)
from ppl_bnn.predictive import predictive_at
from ppl_bnn.reference import ReferenceSettings, reference_document
from ppl_bnn.reference import write_reference as write_reference_file
from ppl_bnn.reference.chains import ChainAssessment, assess_chains, floor

SUITE = "tiny"
FAILED_MESSAGE = "Pyro NUTS blew up at warmup step 3"
TRACEBACK = 'Traceback (most recent call last):\n  File "x.py", line 1\nRuntimeError: boom <&>'
BUDGET_NOTE = "Pyro NUTS costs ~1 ms per gradient: num_warmup cut from 50 to 20"
NOMINAL = np.round(np.arange(0.05, 1.0, 0.05), 2)
#: The study's swept ``kl_weight`` values, and its epistemic std at each (the same everywhere on
#: the grid, so the report's mean over the training range is known).
STUDY_BETAS = (1.0, 0.01)
STUDY_EPISTEMIC = {1.0: 2.5, 0.01: 0.25}


def _sine(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(n, 1))
    return x, np.sin(3 * x[:, 0]) + 0.1 * rng.normal(size=n)


def _blobs(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    centres = np.array([[-1.5, 0.0], [1.5, 0.0], [0.0, 1.5]])
    return centres[y] + 0.7 * rng.normal(size=(n, 2)), y


def _regression_eval(
    result: FitResult,
    x_test: np.ndarray,
    y_test: np.ndarray,
    x_train: np.ndarray,
    y_train: np.ndarray,
    fidelity_draws: int = FIDELITY_DRAWS,
) -> tuple[dict[str, float], dict[str, Any], dict[str, Any]]:
    pred = result.predict(x_test)
    f = pred.f[..., 0]
    sigma = np.broadcast_to(np.asarray(pred.noise_std, dtype=float), (f.shape[0],))
    ll = logsumexp(norm.logpdf(y_test[None, :], f, sigma[:, None]), axis=0) - np.log(len(f))
    pit = norm.cdf((y_test[None, :] - f) / sigma[:, None]).mean(axis=0)
    empirical = [float(np.mean(np.abs(pit - 0.5) <= p / 2)) for p in NOMINAL]
    metrics = {
        "rmse": float(np.sqrt(np.mean((pred.mean - y_test) ** 2))),
        "test_ll": float(ll.mean()),
        "n_nonfinite_ll": float(np.sum(~np.isfinite(ll))),
        "coverage_50": float(np.mean(np.abs(pit - 0.5) <= 0.25)),
        "coverage_90": float(np.mean(np.abs(pit - 0.5) <= 0.45)),
        "coverage_95": float(np.mean(np.abs(pit - 0.5) <= 0.475)),
        "epistemic_std": float(pred.epistemic_std.mean()),
        "total_std": float(pred.std.mean()),
    }
    inside = np.abs(x_test[:, 0]) <= 0.5
    for suffix, mask in (("in", inside), ("out", ~inside)):
        metrics[f"test_ll_{suffix}"] = float(ll[mask].mean())
        metrics[f"rmse_{suffix}"] = float(np.sqrt(np.mean((pred.mean[mask] - y_test[mask]) ** 2)))
        metrics[f"epistemic_std_{suffix}"] = float(pred.epistemic_std[mask].mean())
    with np.errstate(divide="ignore", invalid="ignore"):  # a point estimate: 0 / 0
        ratio = np.float64(metrics["epistemic_std_out"]) / metrics["epistemic_std_in"]
    metrics["epistemic_std_ratio"] = float(ratio)
    curves = {"coverage": {"nominal": NOMINAL.tolist(), "empirical": empirical}}
    grid = np.linspace(-1.5, 1.5, 60)[:, None]
    gpred = result.predict(grid)
    thin = np.linspace(0, len(f) - 1, min(len(f), 200)).astype(int)
    data = {
        "test_y": (("test",), y_test),
        "test_mean": (("test",), pred.mean),
        "test_std": (("test",), pred.std),
        "test_epistemic_std": (("test",), pred.epistemic_std),
        "test_f": (("draw", "test"), f[thin].astype(np.float32)),
        "test_sigma": (("draw",), sigma[thin]),
        **_fidelity_sample(f, sigma, fidelity_draws),
        "test_inside": (("test",), inside.astype(np.int8)),
        "grid_x": (("grid",), grid[:, 0]),
        "grid_mean": (("grid",), gpred.mean),
        "grid_std": (("grid",), gpred.std),
        "grid_epistemic_std": (("grid",), gpred.epistemic_std),
        "train_x": (("train",), x_train[:, 0]),
        "train_y": (("train",), y_train),
    }
    return metrics, curves, data


def _classification_eval(
    result: FitResult, x_test: np.ndarray, y_test: np.ndarray, x_ood: np.ndarray
) -> tuple[dict[str, float], dict[str, Any], dict[str, Any]]:
    probs = result.predict(x_test).probs
    ood = result.predict(x_ood).probs

    def entropy(p: np.ndarray) -> np.ndarray:
        return -np.sum(p * np.log(np.clip(p, 1e-12, None)), axis=1)

    conf, hit = probs.max(axis=1), (probs.argmax(axis=1) == y_test).astype(float)
    edges = np.linspace(0, 1, 16)
    bins = np.clip(np.digitize(conf, edges) - 1, 0, 14)
    count = np.bincount(bins, minlength=15).astype(float)
    conf_bin = np.bincount(bins, conf, 15) / np.maximum(count, 1)
    acc_bin = np.bincount(bins, hit, 15) / np.maximum(count, 1)
    h_test, h_ood = entropy(probs), entropy(ood)
    auroc = float(np.mean(h_ood[:, None] > h_test[None, :]))
    thresholds = np.linspace(0.3, 0.9, 7)
    kept = [float(np.mean(conf >= t)) for t in thresholds]
    acc_kept = [float(hit[conf >= t].mean()) if np.any(conf >= t) else None for t in thresholds]
    onehot = np.eye(probs.shape[1])[y_test]
    nll = -np.log(probs[np.arange(len(y_test)), y_test])
    metrics = {
        "accuracy": float(hit.mean()),
        "nll": float(nll.mean()),
        "n_nonfinite_nll": 0.0,
        "brier": float(np.mean(np.sum((probs - onehot) ** 2, axis=1))),
        "ece": float(np.sum(count / len(conf) * np.abs(acc_bin - conf_bin))),
        "mean_entropy": float(h_test.mean()),
        "ood_auroc": auroc,
        "ood_mean_entropy": float(h_ood.mean()),
    }
    curves = {
        "reliability": {
            "bin_lower": edges[:-1].tolist(),
            "bin_upper": edges[1:].tolist(),
            "confidence": conf_bin.tolist(),
            "accuracy": acc_bin.tolist(),
            "count": count.tolist(),
        },
        "refuse": {"threshold": thresholds.tolist(), "fraction_kept": kept, "accuracy": acc_kept},
    }
    data = {
        "test_y": (("test",), y_test),
        "test_mean_probs": (("test", "class"), probs),
        "test_entropy": (("test",), h_test),
        "ood_entropy": (("ood",), h_ood),
    }
    return metrics, curves, data


def _training(result: FitResult) -> dict[str, Any]:
    """The fit's training curve as the bench stores it (the targets here are not standardised,
    so the held-out log-likelihood needs no change of units)."""
    curve = result.info["training_curve"]
    keys = ("step", "loss", "expected_log_lik", "kl", "kl_weight", "held_out_ll")
    return {**{k: curve[k] for k in keys}, "held_out": "test"}


def _pruning(result: FitResult, x_test: np.ndarray, y_test: np.ndarray) -> dict[str, list]:
    """Test LL and RMSE after zeroing the weights of lowest |mean|/std (Blundell et al. 2015)."""
    draws = {k: v.copy() for k, v in result.draws.items()}
    weights = [k for k in draws if k.startswith("w")]
    snr = np.concatenate(
        [(np.abs(draws[k].mean(axis=(0, 1))) / draws[k].std(axis=(0, 1))).ravel() for k in weights]
    )
    out: dict[str, list] = {"fraction": [], "test_ll": [], "rmse": []}
    for fraction in (0.0, 0.25, 0.5, 0.75, 0.9):
        cut = np.quantile(snr, fraction) if fraction > 0 else -np.inf
        pruned = dict(draws)
        for k in weights:
            keep = np.abs(draws[k].mean(axis=(0, 1))) / draws[k].std(axis=(0, 1)) > cut
            pruned[k] = draws[k] * keep
        pred = predictive_at(result.backend, result.spec, pruned, x_test)
        out["fraction"].append(fraction)
        out["test_ll"].append(pred.mean_log_predictive_density(y_test))
        out["rmse"].append(float(np.sqrt(np.mean((pred.mean - y_test) ** 2))))
    return out


def _sampler_metrics(result: FitResult, test_f: np.ndarray) -> dict[str, float]:
    f = test_f.reshape(result.num_chains, -1, test_f.shape[-1])
    out = metrics.prediction_diagnostics(f)
    out.update(metrics.sampler_diagnostics(result.sample_stats, max_tree_depth=10))
    out.update(
        metrics.cost_metrics(
            seconds=result.timings["sampling"],
            ess=out["ess_bulk_median"],
            num_grads=out["num_grads"],
        )
    )
    return out


def _record(cell: Cell, **fields: Any) -> dict[str, Any]:
    return {
        "cell_id": cell.cell_id,
        "suite": cell.suite,
        "config": cell.config(),
        "config_hash": cell.config_hash(),
        "status": "ok",
        "error": None,
        "metrics": {},
        "curves": {},
        "timings": {},
        "info": {},
        "budget_note": cell.budget_note,
        "versions": {"python": "3.11"},
        "machine": {"cpus": 2},
        "started_at": "2025-01-01T00:00:00+00:00",
        "finished_at": "2025-01-01T00:00:10+00:00",
        "files": {},
        **fields,
    }


REGIONS = {"in": "near zero", "out": "far"}
FLAG = "test log-likelihood (near zero) -9 is below the constant predictor's -1.5"


#: The tiny suite's reference settings (``suite.json``'s ``reference``): two NUTS chains.
REFERENCE_SETTINGS = ReferenceSettings(
    engine="nuts", num_chains=2, chains_per_batch=2, num_warmup=50, num_samples=50,
    max_tree_depth=10, seed=1,
).as_dict()  # fmt: skip
#: The seconds every fabricated reference took.
REFERENCE_WALL_S = 12.5


def reference_entry(
    dataset: str,
    split: int,
    metrics: dict[str, float] | None = None,
    *,
    status: str = "ok",
    note: str | None = None,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``reference.json`` (format 2) from :func:`ppl_bnn.reference.reference_document`, so
    through its gate: of a fit whose chains' diagnostics and floors are ``metrics`` (status
    ``ok`` or ``diverged``), or, without a fit, of ``status`` (failed, infeasible, ...) with
    ``note``."""
    record = None
    if status in ("ok", "diverged"):
        record = {
            "status": status,
            "metrics": metrics or {},
            "timings": {"cell_wall": REFERENCE_WALL_S},
            "versions": {"numpyro": "0.22.0"},
            "finished_at": "2025-01-01T00:00:10+00:00",
        }
    return reference_document(
        dataset, split, settings={**REFERENCE_SETTINGS, **(settings or {})},
        model={"hidden": [5]}, computed_at="2025-01-01T00:00:00+00:00",
        key="0" * 64 if record is not None else None, record=record, status=status, note=note,
    )  # fmt: skip


def write_reference(
    root: Path,
    dataset: str,
    split: int,
    data: dict | None,
    metrics: dict[str, float] | None = None,
    *,
    info: dict[str, Any] | None = None,
    **fields: Any,
) -> Path:
    """A reference posterior's folder: its ``reference.json`` (:func:`reference_entry` of
    ``metrics`` and ``fields``: ``status``, ``note``, ``settings``), its ``record.json`` with
    ``info`` (why it stopped, the chains it dropped) where given, and its predictions where
    ``data`` is given."""
    folder = root / "references" / f"{dataset}-split{split}"
    folder.mkdir(parents=True)
    if data is not None:
        xr.Dataset(data).to_netcdf(folder / PREDICTIONS_FILE, engine="h5netcdf")
    write_reference_file(folder, reference_entry(dataset, split, metrics, **fields))
    if info is not None:
        (folder / RECORD_FILE).write_text(json.dumps({"status": "ok", "info": info}))
    return folder


def _chain_info(assessment: ChainAssessment, stopped: str, seconds: float) -> dict[str, Any]:
    """A reference record's ``info`` as :func:`ppl_bnn.reference.sample.sample_reference`
    leaves it."""
    return {"stopped": stopped, "sampling_seconds": seconds, "chains": assessment.to_dict()}


def _blobs_reference(result: FitResult, x_test: np.ndarray) -> tuple[dict, dict]:
    """The blobs stand-in's chain diagnostics and record ``info``: its 50 draws cut into 5
    pseudo-chains of 10, as the kept ones of 6 (the sixth dropped as frozen), with the floor
    :func:`ppl_bnn.reference.chains.floor` gives them."""
    probs = result.predict(x_test).draws
    per_chain = probs.reshape(5, -1, *probs.shape[1:])
    assessment = ChainAssessment(6, [0, 1, 2, 3, 4], {5: "frozen: step size 1e-06 (median 0.01)"})
    assessment.floor, assessment.floor_random = (
        floor(list(range(5)), split, probs=per_chain, seed=1) for split in ("halves", "random")
    )
    assessment.rhat_across = metrics.prediction_diagnostics(per_chain.max(axis=-1))["rhat_max"]
    info = _chain_info(assessment, "reached the target floor", 3.25)
    return assessment.metrics(), info


def write_cell(root: Path, cell: Cell, result: FitResult, metrics, curves, data) -> Path:
    """Write a fitted cell: InferenceData, predictions and the record (last)."""
    cell_dir = root / "cells" / cell.cell_id
    cell_dir.mkdir(parents=True, exist_ok=True)
    result.to_arviz().to_netcdf(str(cell_dir / IDATA_FILE), engine="h5netcdf")
    if result.losses is not None:
        losses = np.asarray(result.losses)
        data["loss"] = (("member", "step") if losses.ndim == 2 else ("step",), losses)
    xr.Dataset(data).to_netcdf(cell_dir / PREDICTIONS_FILE, engine="h5netcdf")
    timings = {**result.timings, "predict": 0.01, "metrics": 0.01, "cell_wall": 20.0}
    files = {"inference_data": IDATA_FILE, "predictions": PREDICTIONS_FILE}
    extra = {"regions": REGIONS} if "test_inside" in data else {}
    record = _record(
        cell, metrics=metrics, curves=curves, timings=timings, info=result.info, files=files,
        **extra,
    )  # fmt: skip
    write_record(cell_dir, record)
    return cell_dir


def copy_cell(root: Path, src: Cell, dst: Cell, change: Callable[[dict], None]) -> Path:
    """A second cell that shares ``src``'s files; ``change`` edits its record in place."""
    src_dir, dst_dir = root / "cells" / src.cell_id, root / "cells" / dst.cell_id
    shutil.copytree(src_dir, dst_dir)
    record = json.loads((src_dir / "record.json").read_text())
    record.pop("schema_version")
    record.update(cell_id=dst.cell_id, config=dst.config(), config_hash=dst.config_hash())
    change(record)
    write_record(dst_dir, record)
    return dst_dir


def write_suite(root: Path, cells: list[Cell]) -> None:
    suite = {
        "name": SUITE,
        "description": "Tiny suite written by the report tests.",
        "reference": REFERENCE_SETTINGS,
        "environment": {
            "git_commit": "0123456789abcdef",
            "date": "2025-01-01T00:00:00+00:00",
            "machine": {"cpus": 2, "platform": "test"},
            "versions": {"python": "3.11", "numpyro": "0.22.0"},
        },
        "cells": [c.to_dict() for c in cells],
        "wall_s": 60.0,
    }
    (root / "suite.json").write_text(json.dumps(suite, indent=2))


def build(root: Path) -> dict[str, Cell]:
    """Fit and write the whole tiny suite into ``root``; returns its cells by short name."""
    model_kw: Mapping[str, Any] = {"hidden": (5,), "noise": "learned"}
    cfg = {"hidden": [5], "noise": "learned"}

    def cell(dataset: str, method: str, backend: str, split: int = 0, **kw: Any) -> Cell:
        return Cell(SUITE, dataset, split, method, backend, 0, model=cfg, **kw)

    cells: dict[str, Cell] = {}
    x, y = _sine(0, 24)
    xt, yt = _sine(1, 40)
    model = BNN(x, y, **model_kw)
    # Pyro's SVI needs no compilation; NumPyro's costs 10-40 s of JAX compile, so NumPyro runs
    # only cheap programs (map, a small ensemble) and the NUTS reference.
    runs = {
        "svi_pyro": ("svi", "pyro", {"num_steps": 200, "num_draws": 50}),
        "map_np": ("map", "numpyro", {"num_steps": 200}),
        "map_pyro": ("map", "pyro", {"num_steps": 200}),
        "ensemble_np": ("ensemble", "numpyro", {"num_steps": 150, "num_members": 3}),
        "nuts_np": ("nuts", "numpyro", {"num_warmup": 50, "num_samples": 50, "num_chains": 2}),
    }
    for name, (method, backend, options) in runs.items():
        c = cell("sine", method, backend, options=options)
        held_out = {"validation": (xt, yt)} if method == "svi" else {}
        result = fit(model, method, backend=backend, seed=0, **held_out, **options)
        metrics, curves, data = _regression_eval(result, xt, yt, x, y)
        if method == "svi":
            curves["pruning"] = _pruning(result, xt, yt)
            curves["training"] = _training(result)
        if method == "nuts":
            metrics.update(_sampler_metrics(result, np.asarray(data["test_f"][1])))
        write_cell(root, c, result, metrics, curves, data)
        cells[name] = c

    reference = fit(model, "nuts", backend="numpyro", seed=1, **runs["nuts_np"][2])
    _, _, ref_data = _regression_eval(reference, xt, yt, x, y, FIDELITY_REFERENCE_DRAWS)
    # Two chains: judged each on its own, but too few for a floor (the gate needs 4 kept).
    assessment = assess_chains(reference, xt, seed=1)
    found = {
        **assessment.metrics(),
        **sampler_diagnostics(reference.sample_stats, max_tree_depth=10),
    }
    info = _chain_info(assessment, "ran 2 of at most 2 chains", reference.timings["total"])
    write_reference(root, "sine", 0, ref_data, found, info=info)
    flagged = root / "cells" / cells["map_pyro"].cell_id / "record.json"
    record = json.loads(flagged.read_text())
    record.pop("schema_version")
    write_record(flagged.parent, {**record, "flags": [FLAG]})

    cells["svi_pyro_1"] = cell("sine", "svi", "pyro", split=1, options=runs["svi_pyro"][2])

    def second_split(record: dict) -> None:
        record["metrics"].update(rmse=0.5, test_ll=-1.25, rmse_in=0.25, test_ll_out=-3.5)
        # 3 s besides the compilation copied from split 0 (a total below it is a negative cost).
        record["timings"]["total"] = record["timings"].get("compile", 0.0) + 3.0

    copy_cell(root, cells["svi_pyro"], cells["svi_pyro_1"], second_split)

    failed = cell(
        "sine",
        "nuts",
        "pyro",
        options={"num_warmup": 20, "num_samples": 50, "num_chains": 2},
        budget_note=BUDGET_NOTE,
    )
    error = {
        "type": "RuntimeError",
        "message": f"{FAILED_MESSAGE}\nsecond line of the message",
        "traceback": TRACEBACK,
    }
    write_record(root / "cells" / failed.cell_id, _record(failed, status="failed", error=error))
    cells["nuts_pyro_failed"] = failed

    diverged = cell("sine", "sgld", "numpyro", options={"step_size": 1.0})
    write_record(
        root / "cells" / diverged.cell_id,
        _record(
            diverged,
            status="diverged",
            metrics={"rmse": 3.0, "test_ll": -40.0},
            info={"diverged_at_step": [120]},
        ),
    )
    cells["sgld_diverged"] = diverged

    xc, yc = _blobs(2, 30)
    xct, yct = _blobs(3, 30)
    x_ood = np.random.default_rng(4).uniform(-6, 6, size=(20, 2))
    cmodel = BNN(xc, yc, hidden=(5,), likelihood="categorical")
    c = Cell(
        SUITE,
        "blobs",
        0,
        "svi",
        "pyro",
        0,
        model={"hidden": [5]},
        options={"num_steps": 300, "num_draws": 50},
    )
    result = fit(cmodel, "svi", backend="pyro", seed=0, num_steps=300, num_draws=50)
    write_cell(root, c, result, *_classification_eval(result, xct, yct, x_ood))
    cells["blobs_svi"] = c
    stand_in = fit(cmodel, "svi", backend="pyro", seed=1, num_steps=300, num_draws=50)
    _, _, ref_data = _classification_eval(stand_in, xct, yct, x_ood)
    found, info = _blobs_reference(stand_in, xct)
    write_reference(root, "blobs", 0, ref_data, found, info=info, settings={"num_chains": 6})
    write_reference(root, "blobs", 1, None, status="infeasible", note="too many weights")
    cells["blobs_svi_1"] = Cell(
        SUITE, "blobs", 1, "svi", "pyro", 0, model={"hidden": [5]}, options=c.options
    )

    def blobs_split(record: dict) -> None:
        record["metrics"]["accuracy"] = 0.5

    copy_cell(root, c, cells["blobs_svi_1"], blobs_split)
    cells.update(write_study(root))
    write_suite(root, list(cells.values()))
    return cells


def write_study(root: Path) -> dict[str, Cell]:
    """The ``sine/beta`` study: svi at each of :data:`STUDY_BETAS` on both backends, with grid
    predictions made by hand around the sine set's truth; Pyro's smallest beta failed."""
    rng = np.random.default_rng(7)
    x_train = rng.uniform(-0.5, 0.5, size=16)
    y_train = sine_function(x_train) + rng.normal(size=16)
    grid = np.linspace(-1.5, 1.5, 61)
    out = {}
    for backend in ("numpyro", "pyro"):
        for beta in STUDY_BETAS:
            cell = Cell(
                SUITE, "sine", 0, "svi", backend, 0, model={"hidden": [4, 4]},
                options={"num_steps": 100, "kl_weight": beta}, variant="beta", sweep="kl_weight",
            )  # fmt: skip
            out[f"study_{backend}_{beta}"] = cell
            folder = root / "cells" / cell.cell_id
            if backend == "pyro" and beta == min(STUDY_BETAS):
                error = {"type": "RuntimeError", "message": "boom", "traceback": TRACEBACK}
                write_record(folder, _record(cell, status="failed", error=error))
                continue
            epistemic = np.full_like(grid, STUDY_EPISTEMIC[beta])
            data = {
                "grid_x": (("grid",), grid),
                "grid_mean": (("grid",), 0.9 * sine_function(grid)),
                "grid_std": (("grid",), np.sqrt(epistemic**2 + 1.0)),
                "grid_epistemic_std": (("grid",), epistemic),
                "train_x": (("train",), x_train),
                "train_y": (("train",), y_train),
            }
            folder.mkdir(parents=True)
            xr.Dataset(data).to_netcdf(folder / PREDICTIONS_FILE, engine="h5netcdf")
            scores = {
                "test_ll": -2.0 - beta,
                "rmse": 1.5 + beta,
                "epistemic_std_in": STUDY_EPISTEMIC[beta],
                "epistemic_std_out": 2 * STUDY_EPISTEMIC[beta],
            }
            record = _record(
                cell, metrics=scores, timings={"total": 4.0, "compile": 1.5}, regions=REGIONS,
                files={"predictions": PREDICTIONS_FILE},
            )  # fmt: skip
            write_record(folder, record)
    return out


def subset(src: Path, dst: Path, keep: Callable[[dict], bool], references: bool = False) -> Path:
    """Copy the cells of ``src`` whose record satisfies ``keep`` into a new results folder (with
    the references, if asked)."""
    dst.mkdir(parents=True)
    if references:
        shutil.copytree(src / "references", dst / "references")
    kept = []
    for cell_dir in sorted((src / "cells").iterdir()):
        record = json.loads((cell_dir / "record.json").read_text())
        if keep(record):
            shutil.copytree(cell_dir, dst / "cells" / cell_dir.name)
            kept.append(record)
    suite = json.loads((src / "suite.json").read_text())
    kept_ids = {r["cell_id"] for r in kept}
    suite["cells"] = [c for c in suite["cells"] if Cell(**c).cell_id in kept_ids]
    (dst / "suite.json").write_text(json.dumps(suite))
    return dst
