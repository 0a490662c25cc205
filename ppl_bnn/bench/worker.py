"""The worker process of :mod:`ppl_bnn.bench.pool`: forked by the pool's fork server, which
has imported torch, JAX and the rest once (:func:`preload`).

It sets its thread budget and XLA host devices before JAX or torch start, says it is ready on
its reply pipe, then runs the cells and probes sent as JSON lines on its task pipe, one at a
time, until that pipe closes (:func:`main`). For each cell it fits, evaluates and writes the
fit as :meth:`~ppl_bnn.results.FitResult.load` reads it (``inference_data.nc``, ``fit.json`` and
a guide's ``variational.nc``), ``predictions.nc`` and, last, ``record.json`` into the task's folder,
then answers one JSON line. A fit that raises still gets a record (``failed`` with the
traceback, or ``diverged`` when the method broke down numerically) and the worker goes on; only
a hang (killed at the timeout) or a crash of the interpreter ends it, and the pool replaces it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import threadpoolctl

from ppl_bnn import devices
from ppl_bnn.bench.cell import Cell, Probe, base_record, cell_from_dict, model_arguments
from ppl_bnn.bench.environment import timestamp
from ppl_bnn.bench.evaluate import evaluate, predictions_dataset
from ppl_bnn.bench.fit_store import use_store
from ppl_bnn.bench.pool import named_backends
from ppl_bnn.bench.probes import run_probe
from ppl_bnn.bench.record import IDATA_FILE, PREDICTIONS_FILE, write_record
from ppl_bnn.bench.tuning import reports_divergence, tune
from ppl_bnn.data import load_dataset
from ppl_bnn.engine.contracts import Compilations
from ppl_bnn.engine.registry import get_backend
from ppl_bnn.files import import_arviz, write_atomic
from ppl_bnn.fit import fit
from ppl_bnn.methods import get_method
from ppl_bnn.methods.base import DivergedError, HessianError
from ppl_bnn.metrics.reference import FIDELITY_DRAWS, FIDELITY_REFERENCE_DRAWS
from ppl_bnn.model.bnn import BNN
from ppl_bnn.reference import ReferenceSettings, data_fingerprint
from ppl_bnn.reference.chains import ChainAssessment
from ppl_bnn.reference.sample import sample_reference
from ppl_bnn.results import FitResult
from ppl_bnn.runtime import configure_runtime
from ppl_bnn.timing import now
from ppl_bnn.units import Units
from ppl_bnn.versions import library_versions

logger = logging.getLogger(__name__)

#: Warnings logged during one cell that its record keeps (the first ones).
MAX_LOGGED_WARNINGS = 20


@contextlib.contextmanager
def logged_warnings() -> Any:
    """Collect the messages of the warnings (and errors) logged while the block runs, from any
    logger, into the list it yields: a fallback a fit took (e.g. a Pyro potential traced because
    compiling it failed) belongs in the cell's record, not only in the worker's stderr."""
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, entry: logging.LogRecord) -> None:
            if len(messages) < MAX_LOGGED_WARNINGS:
                messages.append(f"{entry.levelname} {entry.name}: {entry.getMessage()}")

    handler = Collect(level=logging.WARNING)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield messages
    finally:
        root.removeHandler(handler)


def run(
    cell: Cell,
    out_dir: Path,
    *,
    data_dir: str | None,
    threads: int,
    jax_cache: str | None = None,
    worker: dict[str, Any] | None = None,
    warnings: list[str] | None = None,
    attempt: int = 1,
) -> dict[str, Any]:
    """Fit and evaluate ``cell``; write its files and record into ``out_dir`` (``worker``: what
    the record says of the process that ran it; ``warnings``: the list
    :func:`logged_warnings` fills, kept in the record as ``warnings``; ``attempt``: the run's
    count, see :func:`ppl_bnn.bench.record.next_attempt`)."""
    record = base_record(cell, attempt)
    # The flags XLA compiled the cell's programs with: the worker's environment and its
    # xla_optimisation (see Cell.xla_optimisation).
    xla_flags = os.environ.get("XLA_FLAGS", "")
    record.update(threads=threads, jax_cache=jax_cache, worker=worker or {}, xla_flags=xla_flags)
    start = now()
    compilations = None
    fitting = 0.0  # seconds inside fit, the tuning grid's fits included
    try:
        # The suite's shared cache, or none (--no-jax-cache): never the user's own directory.
        configure_runtime(jax_cache=jax_cache or False)
        compilations = get_backend(cell.backend).fit_compilations()  # this cell's, tuning too
        data = load_dataset(cell.dataset, split=cell.split, data_dir=data_dir, **cell.data)
        record["data_sha256"] = data_fingerprint(data)  # what the cell is fit on
        settings, options, tuning = cell.model, cell.options, None
        if cell.tune is not None:
            # Settings chosen on a validation split of the training set, never the test set.
            tuning = tune(cell, data)
            settings, options = tuning.model, tuning.options
            fitting += tuning.seconds - tuning.info["shared_seconds"]
        model = BNN(data.x_train, data.y_train, **model_arguments(settings, data))
        result, chains = _fit(cell, model, data, options)
        fitting += result.timings["total"] - result.timings.get("shared", 0.0)
        fidelity_draws = FIDELITY_DRAWS if chains is None else FIDELITY_REFERENCE_DRAWS
        evaluation = evaluate(
            result, data, stored_draws=cell.stored_draws, fidelity_draws=fidelity_draws
        )
        if chains is not None:  # a reference: its chains, and the floor in original units
            scale = data.y_std if data.task == "regression" else 1.0
            evaluation.metrics.update(chains.metrics(scale))
        attrs = {"cell_id": cell.cell_id, "dataset": cell.dataset, "split": cell.split}
        # The whole fit, so that FitResult.load reads the cell's folder back, with the units of
        # its data: loaded, it predicts from and in them (evaluate worked in the fitted ones).
        replace(result, units=Units.of(data)).write_into(out_dir)
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
    _finish_record(record, now() - start, fitting, compilations, warnings)
    write_record(out_dir, record)
    return record


def _finish_record(
    record: dict[str, Any],
    wall: float,
    fitting: float,
    compilations: Compilations | None,
    warnings: list[str] | None,
) -> None:
    """A cell's record completed: its wall time, its time outside fit (loading data,
    evaluating, writing its files), its compilations and its logged warnings."""
    record["timings"]["cell_wall"] = wall
    record["timings"]["overhead"] = wall - fitting
    if compilations is not None:  # this cell's, not the worker's since it started
        counts = compilations.finish()
        record["compilation"] = {
            "xla_compiles": counts["compiles"],
            "jax_cache_hits": counts["cache_hits"],
        }
    if warnings:
        record["warnings"] = list(warnings)
    record["finished_at"] = timestamp()


def _fit(
    cell: Cell, model: BNN, data: Any, options: dict[str, Any]
) -> tuple[FitResult, ChainAssessment | None]:
    """The cell's fit: ``fit`` (with the test set as a training curve's held-out set, for the
    report only: never used to fit or to choose anything), or for a reference its chain
    ensemble and their assessment."""
    if cell.reference is not None:
        settings = ReferenceSettings(**{k: v for k, v in cell.reference.items()
                                        if k != "stored_draws"})  # fmt: skip
        return sample_reference(model, data.x_test, settings)
    held_out = {}
    if get_method(cell.method, cell.backend).records_curves:
        held_out["validation"] = (data.x_test, data.y_test)
    result = fit(model, cell.method, backend=cell.backend, seed=cell.seed, **held_out, **options)
    return result, None


def run_probe_cell(
    probe: Probe, out_dir: Path, *, data_dir: str | None, threads: int, attempt: int = 1
) -> dict[str, Any]:
    """Run a performance probe; its rows go into the record's ``perf`` list."""
    record = base_record(probe, attempt)
    record.update(threads=threads)
    start = now()
    try:
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
    """End this worker (and its process group) when the runner that started it is gone, so that
    killing a sweep leaves no fits running. The runner is not this process's parent (the fork
    server is): a thread waits on a descriptor of the runner's process (``pidfd_open``, Linux),
    which becomes readable when it exits, or else asks every second whether it still runs."""

    def watch() -> None:
        try:
            runner = os.pidfd_open(parent)
        except AttributeError:  # pragma: no cover - not Linux
            while _runs(parent):
                time.sleep(1.0)
        except ProcessLookupError:
            pass
        else:
            select.select([runner], [], [])
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, name="runner-watch", daemon=True).start()


def _runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - it runs as another user
        pass
    return True


def run_task(task: dict[str, Any], threads: int) -> dict[str, Any]:
    """Run one task of the pool: ``cell`` (its ``to_dict()``) into ``out_dir``, with the
    ``data_dir``, ``jax_cache`` and shared-fit store (``fit_store``, see
    :mod:`ppl_bnn.bench.fit_store`) it names, as its ``attempt``-th run; ``worker`` (how many
    tasks the worker has run, the seconds it took to start where this task started it) joins
    the record's ``worker``."""
    cell = cell_from_dict(task["cell"])
    out_dir = Path(task["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    attempt = task.get("attempt", 1)
    if isinstance(cell, Probe):
        return run_probe_cell(
            cell, out_dir, data_dir=task.get("data_dir"), threads=threads, attempt=attempt
        )
    with use_store(task.get("fit_store")), logged_warnings() as warnings:
        return run(
            cell,
            out_dir,
            data_dir=task.get("data_dir"),
            threads=threads,
            jax_cache=task.get("jax_cache"),
            worker={"pid": os.getpid(), **task.get("worker", {})},
            warnings=warnings,
            attempt=attempt,
        )


def preload() -> None:
    """Import what every cell needs, once: the backends (those named in
    ``$PPL_BNN_PRELOAD_BACKENDS``, see :func:`ppl_bnn.bench.pool.preload_backends`, else every
    one) and their libraries, ArviZ and netCDF I/O, scikit-learn's data sets (the pool's fork
    server does, before it forks workers)."""
    import h5netcdf  # noqa: F401
    import sklearn.datasets  # noqa: F401

    for backend in named_backends():
        get_backend(backend)
    import_arviz()


#: The logger whose INFO lines a worker sends to its parent while a task runs: a reference's
#: batches (chains run and kept, seconds, floor), minutes apart.
RELAYED_LOGGER = "ppl_bnn.reference"


class _Relay(logging.Handler):
    """Sends each line of :data:`RELAYED_LOGGER` to the parent as a progress line, prefixed
    with the running task's ``label`` (see :mod:`ppl_bnn.bench.pool`)."""

    def __init__(self, answer: Callable[[dict[str, Any]], None]) -> None:
        super().__init__(logging.INFO)
        self.answer, self.label = answer, ""

    def emit(self, entry: logging.LogRecord) -> None:
        text = f"{self.label}: {entry.getMessage()}"
        self.answer({"log": text, "logger": entry.name, "level": entry.levelno})


def _task_label(task: dict[str, Any]) -> str:
    """A task's name in progress lines: its data set and split (a probe: its name)."""
    cell = cell_from_dict(task["cell"])
    return cell.cell_id if isinstance(cell, Probe) else f"{cell.label} split {cell.split}"


def main(
    tasks_fd: int,
    reply_fd: int,
    stderr_fd: int,
    environment: dict[str, str],
    threads: int,
    host_devices: int,
    parent_pid: int,
    xla_optimisation: str | None = None,
    run_task: Callable[[dict[str, Any], int], dict[str, Any]] = run_task,
) -> None:
    """The worker, forked by the pool's fork server: a session of its own (a timeout kills it
    with everything it started), stdout to nowhere and stderr to ``stderr_fd``, the runner's
    ``environment`` with its thread budget and ``xla_optimisation`` (None: the environment's
    flags); then it runs the tasks read as JSON lines from ``tasks_fd`` until that closes,
    answering each on ``reply_fd``. ``run_task`` runs one (tests inject faults through it)."""
    os.setsid()
    os.dup2(stderr_fd, 2)
    os.close(stderr_fd)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    os.environ.clear()
    os.environ.update(environment)
    _exit_with_parent(parent_pid)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Before JAX or torch start; the JAX cache is chosen per cell, never the user's own; the
    # device is the one the parent process chose (configure_runtime(device=...), --device).
    configure_runtime(
        host_devices=host_devices,
        torch_threads=threads,
        jax_cache=False,
        device=os.environ.get(devices.ENV_VAR),
        xla_optimisation=xla_optimisation,
    )
    threadpoolctl.threadpool_limits(threads)  # loaded at one thread by the fork server
    preload()
    replies = os.fdopen(reply_fd, "w")

    def answer(message: dict[str, Any]) -> None:
        replies.write(json.dumps(message) + "\n")
        replies.flush()

    answer({"ready": True, "pid": os.getpid()})
    relay = _Relay(answer)
    progress_logger = logging.getLogger(RELAYED_LOGGER)
    progress_logger.setLevel(logging.INFO)
    progress_logger.addHandler(relay)
    with os.fdopen(tasks_fd) as tasks:
        for line in tasks:
            task = json.loads(line)
            relay.label = _task_label(task)
            record = run_task(task, threads)
            answer({"status": record["status"]})
