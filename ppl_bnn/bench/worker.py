"""Run one cell in this process: ``python -m ppl_bnn.bench.worker CELL_JSON OUT_DIR``.

The runner starts one such process per cell, so a crash, a hang (killed at the timeout) or a
thread-pool setting never reaches another cell. The process sets its thread budget before JAX or
torch start, fits, evaluates and writes ``inference_data.nc``, ``predictions.nc`` and, last,
``record.json`` into ``OUT_DIR``. A fit that raises still gets a record (``failed`` with the
traceback, or ``diverged`` when the method broke down numerically); the exit status is 0
whenever a record was written.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from ppl_bnn import BNN, configure_runtime, fit
from ppl_bnn.backends.numpyro.compile_cache import compile_counter, enable_jax_cache
from ppl_bnn.bench.cell import Cell, Probe, base_record, cell_from_dict, model_arguments
from ppl_bnn.bench.environment import timestamp
from ppl_bnn.bench.evaluate import evaluate, predictions_dataset
from ppl_bnn.bench.probes import run_probe
from ppl_bnn.bench.record import IDATA_FILE, PREDICTIONS_FILE, write_record
from ppl_bnn.bench.tuning import reports_divergence, tune
from ppl_bnn.data import load_dataset
from ppl_bnn.files import write_atomic
from ppl_bnn.methods import get_method
from ppl_bnn.methods.base import DivergedError, HessianError
from ppl_bnn.timing import now
from ppl_bnn.versions import library_versions

logger = logging.getLogger(__name__)


def run(
    cell: Cell,
    out_dir: Path,
    *,
    data_dir: str | None,
    threads: int,
    jax_cache: str | None = None,
) -> dict[str, Any]:
    """Fit and evaluate ``cell``; write its files and record into ``out_dir``."""
    record = base_record(cell)
    record.update(threads=threads, jax_cache=jax_cache)
    start = now()
    numpyro = cell.backend == "numpyro"
    compiles = compile_counter() if numpyro else None
    try:
        # Each backend's runtime only: a cell never starts the other library.
        if numpyro:
            configure_runtime(host_devices=max(1, int(cell.options.get("num_chains", 1))))
        else:
            configure_runtime(torch_threads=threads)
        data = load_dataset(cell.dataset, split=cell.split, data_dir=data_dir, **cell.data)
        settings, options, tuning = cell.model, cell.options, None
        if cell.tune is not None:
            # Settings chosen on a validation split of the training set, never the test set.
            tuning = tune(cell, data)
            settings, options = tuning.model, tuning.options
        model = BNN(data.x_train, data.y_train, **model_arguments(settings, data))
        # The test set as the held-out set of a training curve: shown in the report only,
        # never used to fit or to choose anything.
        held_out = {}
        if get_method(cell.method, cell.backend).records_curves:
            held_out["validation"] = (data.x_test, data.y_test)
        result = fit(
            model, cell.method, backend=cell.backend, seed=cell.seed, **held_out, **options
        )
        evaluation = evaluate(result, data, stored_draws=cell.stored_draws)
        attrs = {"cell_id": cell.cell_id, "dataset": cell.dataset, "split": cell.split}
        idata = result.to_arviz()
        write_atomic(out_dir / IDATA_FILE, lambda tmp: idata.to_netcdf(tmp, engine="h5netcdf"))
        preds = predictions_dataset(evaluation, {**attrs, **result.attrs()})
        write_atomic(
            out_dir / PREDICTIONS_FILE, lambda tmp: preds.to_netcdf(tmp, engine="h5netcdf")
        )
        info, timings = result.info, {**result.timings, **evaluation.timings}
        if tuning is not None:
            info, timings = {**info, "tuning": tuning.info}, {**timings, "tuning": tuning.seconds}
        record.update(
            status="diverged" if reports_divergence(result.info) else "ok",
            metrics=evaluation.metrics,
            flags=evaluation.flags,
            regions=evaluation.regions,
            curves=evaluation.curves,
            timings=timings,
            info=info,
            versions=result.versions,
            files={"inference_data": IDATA_FILE, "predictions": PREDICTIONS_FILE},
            n_train=data.n_train,
            n_test=data.n_test,
        )
    except (DivergedError, HessianError) as err:
        # The method broke down numerically (non-finite values; for laplace, a Hessian that is
        # not positive definite): a result about the method, reported with its message.
        record.update(status="diverged", error=_error(err))
    except Exception as err:  # every failure is recorded, never raised
        logger.exception("cell %s failed", cell.cell_id)
        record.update(status="failed", error=_error(err))
    record["timings"]["cell_wall"] = now() - start
    if compiles is not None:
        record["compilation"] = compiles.as_dict()
    record["finished_at"] = timestamp()
    write_record(out_dir, record)
    return record


def run_probe_cell(
    probe: Probe, out_dir: Path, *, data_dir: str | None, threads: int
) -> dict[str, Any]:
    """Run a performance probe; its rows go into the record's ``perf`` list."""
    record = base_record(probe)
    record.update(threads=threads)
    start = now()
    try:
        # Prediction spreads draws over host devices; the other probes time one device.
        host_devices = threads if probe.kind == "predict" else 1
        configure_runtime(host_devices=host_devices, torch_threads=threads)
        rows = run_probe(probe, data_dir)
        record.update(status="ok", perf=rows, versions=library_versions())
    except Exception as err:  # every failure is recorded, never raised
        logger.exception("probe %s failed", probe.cell_id)
        record.update(status="failed", error=_error(err))
    record["timings"]["cell_wall"] = now() - start
    record["finished_at"] = timestamp()
    write_record(out_dir, record)
    return record


def _error(err: BaseException) -> dict[str, str]:
    return {"type": type(err).__name__, "message": str(err), "traceback": traceback.format_exc()}


def _exit_with_parent(parent: int) -> None:
    """End this worker (and its process group) if the runner that started it is gone, so that
    killing a sweep leaves no fits running."""

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cell", help="the cell as JSON")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--jax-cache", default=None, help="JAX persistent compilation cache dir")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when it exits")
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        _exit_with_parent(args.parent_pid)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    cell = cell_from_dict(json.loads(args.cell))
    if cell.backend != "pyro":
        # The suite's shared cache, or none (--no-jax-cache): never the user's own directory.
        configure_runtime(jax_cache=args.jax_cache or False)
        enable_jax_cache()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if isinstance(cell, Probe):
        run_probe_cell(cell, args.out_dir, data_dir=args.data_dir, threads=args.threads)
    else:
        run(
            cell,
            args.out_dir,
            data_dir=args.data_dir,
            threads=args.threads,
            jax_cache=args.jax_cache,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
