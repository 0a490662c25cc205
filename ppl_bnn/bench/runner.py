"""Run a suite's reference posteriors and cells, resuming from what is already stored.

Results live in ``<results_dir>/cells/<cell_id>/`` (see :mod:`ppl_bnn.bench.record`) with
``<results_dir>/suite.json`` describing the sweep. A cell is skipped when its stored record has
the same config hash and status ``ok`` or ``diverged`` (a divergence is a result of the method,
reproducible from the seed); ``failed`` and ``timeout`` cells run again until they have had
:data:`~ppl_bnn.defaults.MAX_ATTEMPTS` runs (none more without ``retry``, as many as asked
with ``rerun_failed``); ``force`` reruns every cell. A rerun that fails never replaces a
complete result (see :mod:`ppl_bnn.bench.process`).

A sweep holds ``<results_dir>/.lock`` (:mod:`ppl_bnn.bench.lock`) from start to end: a second
sweep on the same folder is refused (or waits), and only staging folders whose owner process
is gone are cleaned up (:func:`ppl_bnn.files.clean_staging`).

Reference posteriors (:mod:`ppl_bnn.reference`) are looked up in their content-addressed cache
(``<cache root>/<key>/``) and computed only when absent, or when they failed or timed out and
are retried as cells are, by the same worker process as cells and on the same executor, submitted
before the cells since they are the longest jobs. ``force`` does not recompute them: a key
fixes the result. A reference is computed under its cache entry's lock, so two sweeps that
need it compute it once: the second waits and takes the first's. Each reference's
``reference.json``, ``record.json`` and ``predictions.nc``
are copied to ``<results_dir>/references/<dataset>-split<k>/``; a dataset with
``no_reference`` gets a ``reference.json`` saying why there is none. A failed reference never
stops the sweep; it is listed in the summary.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppl_bnn.bench import pool
from ppl_bnn.bench.auto_seeds import more_cells, stored_cells
from ppl_bnn.bench.cell import Cell
from ppl_bnn.bench.data_files import write_split_rows
from ppl_bnn.bench.environment import timestamp
from ppl_bnn.bench.executors import dask_executor, local_executor
from ppl_bnn.bench.lock import LOCK_FILE, hold_lock
from ppl_bnn.bench.preflight import check_cells_memory
from ppl_bnn.bench.process import run_cells_process
from ppl_bnn.bench.progress import SweepProgress
from ppl_bnn.bench.record import (
    FAILED,
    last_run,
    record_problem,
    retried,
)
from ppl_bnn.bench.reference_jobs import (
    PendingReference,
    ReferenceOutcome,
    plan_references,
    publish_reference,
    reference_outcome,
    submit_reference,
)
from ppl_bnn.bench.schema import SELECTION_FLAGS, check_selection
from ppl_bnn.bench.suite import ReferenceJob, Suite
from ppl_bnn.bench.suite_file import current_configs, previous_runs, write_suite_file
from ppl_bnn.devices import cpu_count
from ppl_bnn.files import clean_staging
from ppl_bnn.reference import (
    REFERENCES_DIR,
    cache_root,
)
from ppl_bnn.timing import now

logger = logging.getLogger(__name__)
#: Method -> the shared method whose runs (same seed and options) it starts from: a sweep runs
#: its cells after that method's, so that they read them (the GGN Laplace expands around MAP's
#: mode).
STARTS_FROM: dict[str, str] = {"laplace": "map"}
#: The results folder's shared-fit store (:mod:`ppl_bnn.bench.fit_store`).
FITS_DIR = "fits"


@dataclass
class SweepSummary:
    """What a sweep did: counts of cells by status (all of them, and those skipped as already
    done), wall time, and every reference job's outcome."""

    statuses: Counter = field(default_factory=Counter)
    skipped_statuses: Counter = field(default_factory=Counter)
    wall_s: float = 0.0
    failed_cells: list[str] = field(default_factory=list)
    references: list[ReferenceOutcome] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        """Cells skipped as already done (their stored record kept)."""
        return sum(self.skipped_statuses.values())

    @property
    def ran(self) -> Counter:
        """Counts by status of the cells this sweep ran (skipped ones left out)."""
        return self.statuses - self.skipped_statuses

    @property
    def ok(self) -> bool:
        """True when no cell of the suite is ``failed`` or ``timeout`` (references aside)."""
        return not self.failed_cells

    @property
    def failed_references(self) -> list[str]:
        """References that failed or timed out (``<dataset>-split<k>``)."""
        return [r.name for r in self.references if r.failed]


def plan(
    cells: list[Cell],
    cells_dir: Path,
    *,
    retry: bool = True,
    rerun_failed: bool = False,
    force: bool = False,
) -> tuple[list[Cell], list[dict[str, Any]]]:
    """Split ``cells`` into those to run and the stored records of those to skip: a cell runs
    unless its stored record has its configuration and is complete, or failed and is not
    :func:`~ppl_bnn.bench.record.retried`.

    A cell's stored record of another configuration counts as its last failed attempt where a
    rerun with the current configuration failed and left that earlier result in place."""
    todo, kept = [], []
    for cell in cells:
        record = None if force else last_run(cells_dir / cell.cell_id, cell.config_hash())
        if record is None or record.get("config_hash") != cell.config_hash():
            todo.append(cell)
        elif problem := record_problem(cells_dir / cell.cell_id, record):
            # "Done" means complete: a result with a part missing is run again.
            logger.warning("%s: the stored result is not whole (%s): running it again",
                           cell.cell_id, problem)  # fmt: skip
            todo.append(cell)
        elif retried(record, retry=retry, rerun_failed=rerun_failed):
            todo.append(cell)
        else:
            kept.append(record)
    return todo, kept


def _group_statuses(future: Future, group: list[Cell]) -> list[str]:
    try:
        return [str(record["status"]) for record in future.result()]
    except Exception:  # an executor failure must not stop the sweep
        logger.exception("%s: the executor failed to run the cells",
                         ", ".join(c.cell_id for c in group))  # fmt: skip
        return ["failed"] * len(group)


def _after(groups: list[list[tuple[Cell, Path]]]) -> dict[int, int]:
    """For each group whose method starts from another's shared runs (:data:`STARTS_FROM`), the
    index of the group of that method on the same dataset, split, backend and seeds, tuned
    alike, where this sweep runs one."""

    def place(group: list[tuple[Cell, Path]], method: str) -> tuple:
        cell = group[0][0]
        seeds = tuple(c.seed for c, _ in group)
        return (cell.label, cell.split, cell.backend, cell.tune is None, seeds, method)

    cells = [i for i, group in enumerate(groups) if isinstance(group[0][0], Cell)]  # not probes
    producers = {place(groups[i], groups[i][0][0].method): i for i in cells}
    out = {}
    for i in cells:
        group = groups[i]
        first = STARTS_FROM.get(group[0][0].method)
        if first is not None and (j := producers.get(place(group, first))) is not None:
            out[i] = j
    return out


def sweep_backends(
    references: list[PendingReference], cells: list[tuple[Cell, Path]]
) -> tuple[str, ...] | None:
    """The backends a sweep's references and cells run on, or None where it runs a probe
    (which may time any backend)."""
    jobs = [pending.job.cell for pending in references] + [cell for cell, _ in cells]
    if any(not isinstance(job, Cell) for job in jobs):
        return None
    return tuple(sorted({job.backend for job in jobs}))


def program_groups(cells: list[tuple[Cell, Path]]) -> list[list[tuple[Cell, Path]]]:
    """``cells`` grouped by everything but the seed, in the order of each group's first cell:
    a group runs in one worker, which compiles its programs once."""
    groups: dict[str, list[tuple[Cell, Path]]] = {}
    for cell, out_dir in cells:
        config = {k: v for k, v in cell.config().items() if k != "seed"}
        key = json.dumps(config, sort_keys=True) if isinstance(cell, Cell) else cell.cell_id
        groups.setdefault(key, []).append((cell, out_dir))
    return list(groups.values())


def _executor(jobs: int | None, dask_address: str | None) -> tuple[Any, int | None, int | None]:
    """The executor's context manager, the threads each process gets (None: Dask decides) and
    the jobs to hand it at once (None: every job, for Dask to schedule)."""
    if dask_address:
        return dask_executor(dask_address), None, None
    jobs = cpu_count() if jobs is None else jobs
    return local_executor(jobs), max(1, cpu_count() // jobs), jobs


def check_jobs(jobs: int | None) -> None:
    """``ValueError`` unless ``jobs`` is None (one per core) or a positive integer: 0 is no
    shorthand for the default."""
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(
            f"jobs must be a positive integer (or left out: one per core), got {jobs!r}"
        )


def _sweep(
    executor_cm: Any,
    references: list[PendingReference],
    cells: list[tuple[Cell, Path]],
    summary: SweepSummary,
    *,
    root: Path,
    results: Path | None,
    on_progress: Callable[[list[str]], None] | None = None,
    in_flight: int | None = None,
    **process: Any,
) -> None:
    """Run references (first: the longest jobs) and then cells (each into its directory, the
    seeds of a program together: :func:`program_groups`) on one executor, recording each
    outcome in ``summary`` as it finishes; references are published into ``results`` unless it
    is None. ``on_progress`` is called with the datasets of the cells that just finished.

    At most ``in_flight`` jobs are handed to the executor at once (None: all), the next group
    always the first in the suite's order that may start: a group that starts from another's
    shared runs (:func:`_after`) may start once that one has finished, and then goes before the
    groups that come after it in the suite, not to the end of the queue."""
    pool.allow_work()
    pool.preload_backends(sweep_backends(references, cells))
    with (
        executor_cm as executor,
        SweepProgress(len(references), len(cells)) as bar,
        pool.relayed_to(bar.set_postfix_str),  # a reference's batches, as they finish
    ):
        try:
            _schedule(executor, references, cells, summary, bar, root=root, results=results,
                      on_progress=on_progress, in_flight=in_flight, **process)  # fmt: skip
        except KeyboardInterrupt:
            # A Ctrl-C: nothing more starts, the cells running now end within a second (their
            # workers are killed; they leave no record, so a resumed sweep runs them again),
            # and what finished stays.
            logger.warning("interrupted: stopping the running cells")
            pool.interrupt()
            raise


def _schedule(
    executor: Executor,
    references: list[PendingReference],
    cells: list[tuple[Cell, Path]],
    summary: SweepSummary,
    bar: Any,
    *,
    root: Path,
    results: Path | None,
    on_progress: Callable[[list[str]], None] | None,
    in_flight: int | None,
    **process: Any,
) -> None:
    """:func:`_sweep`'s loop: hand jobs to ``executor`` and record them as they finish."""
    futures: dict[Future, PendingReference | list[Cell]] = {}
    for job in references:
        futures[submit_reference(executor, job, root, **process)] = job
    store = None if results is None else str(results / FITS_DIR)
    kept_in = None if results is None else str(results)
    groups = program_groups(cells)
    after = _after(groups)
    held: dict[int, list[int]] = {}  # a group's index -> the groups that start from it
    for i, j in after.items():
        held.setdefault(j, []).append(i)
    ready = [i for i in range(len(groups)) if i not in after]  # in the suite's order
    index: dict[Future, int] = {}
    pending = set(futures)
    while pending or ready:
        while ready and (in_flight is None or len(pending) < in_flight):
            i = ready.pop(0)
            tasks = [(cell.to_dict(), str(out_dir)) for cell, out_dir in groups[i]]
            future = executor.submit(
                run_cells_process, tasks, fit_store=store, results_dir=kept_in, **process
            )
            futures[future], index[future] = [c for c, _ in groups[i]], i
            pending.add(future)
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            # The groups that start from this one's runs, now in the store.
            ready = sorted(ready + held.pop(index.get(future, -1), []))
            _record(future, futures[future], summary, bar, root, results, on_progress)


def _record(
    future: Future,
    item: PendingReference | list[Cell],
    summary: SweepSummary,
    bar: Any,
    root: Path,
    results: Path | None,
    on_progress: Callable[[list[str]], None] | None,
) -> None:
    """Record a finished reference or group of cells in ``summary``, the progress bar and
    ``on_progress``; publish a reference into ``results`` unless it is None."""
    if isinstance(item, PendingReference):
        outcome = reference_outcome(future, item, root)
        summary.references.append(outcome)
        if results is not None:
            publish_reference(outcome, root, results)
        label, status = f"reference {outcome.name}", outcome.document["status"]
        bar.done("reference")
    else:
        for cell, status in zip(item, _group_statuses(future, item), strict=True):
            summary.statuses[status] += 1
            if status in FAILED:
                summary.failed_cells.append(cell.cell_id)
        label = item[-1].cell_id
        bar.done("cell", len(item))
    bar.set_postfix_str(f"{label}: {status}")
    if on_progress is not None:
        on_progress([] if isinstance(item, PendingReference) else [c.label for c in item])


def run_suite(
    suite: Suite,
    results_dir: str | Path,
    *,
    jobs: int | None = None,
    dask_address: str | None = None,
    data_dir: str | None = None,
    max_splits: int | None = None,
    only: dict[str, set[str]] | None = None,
    retry: bool = True,
    rerun_failed: bool = False,
    force: bool = False,
    jax_cache: str | None = None,
    references: bool = True,
    reference_dir: str | Path | None = None,
    wait: bool = False,
    on_progress: Callable[[list[str]], None] | None = None,
) -> SweepSummary:
    """Run the suite's references that are not cached, then every cell not already done; never
    stop at a failing cell or reference. The results folder is locked from start to end.

    Args:
        suite: The parsed suite.
        results_dir: Where ``cells/``, ``references/`` and ``suite.json`` go (``reports/<suite>``).
        jobs: Cells at once on this machine (default: the number of cores), each process with
            ``cores // jobs`` threads so that cells never oversubscribe the cores.
        dask_address: Run on this Dask scheduler instead of locally.
        data_dir: Data directory for datasets that need one.
        max_splits, only: Only the first splits of each dataset; only these datasets /
            methods / backends (references: datasets only).
        retry: Run failed or timed out cells and references again, until each has had
            :data:`~ppl_bnn.defaults.MAX_ATTEMPTS` runs; False keeps the failures.
        rerun_failed: Run them again however many runs they have had.
        force: Rerun every cell (references are reused: their key fixes their result).
        jax_cache: JAX persistent compilation cache directory shared by the cells.
        references: Run the suite's references (when it has a ``[reference]`` table).
        reference_dir: The reference cache root (see :func:`ppl_bnn.reference.cache_root`).
        wait: Wait for another sweep holding the results folder's lock to end, instead of
            raising :class:`ppl_bnn.bench.lock.LockedError`.
        on_progress: Called, in this thread, whenever a reference or a group of cells has
            finished, with the datasets of those cells (e.g. to render the report so far).
    """
    check_jobs(jobs)
    jobs = _probe_jobs(suite, jobs, dask_address)
    check_selection(suite.name, only, suite.selectable())  # a typo, before any folder is made
    selection = {"data_dir": data_dir, "max_splits": max_splits, "only": only}
    cells = suite.cells(**selection)
    check_cells_memory(cells, data_dir)  # what no machine here could fit, likewise
    start, started_at = now(), timestamp()
    results = Path(results_dir)
    results.mkdir(parents=True, exist_ok=True)
    with hold_lock(results / LOCK_FILE, wait=wait):
        cells_dir = _prepare_folder(suite, results, cells, only)
        # seeds = "auto": the seeds an earlier run added are this run's too.
        cells.extend(stored_cells(suite, cells_dir, {c.cell_id for c in cells}, **selection))
        todo, kept = plan(cells, cells_dir, retry=retry, rerun_failed=rerun_failed, force=force)
        summary = _count_kept(SweepSummary(), kept)
        root = cache_root(reference_dir)
        ref_jobs = suite.references(**selection) if references and suite.reference else []
        log = _SuiteLog(suite, results, cells, references, current_configs(suite, data_dir),
                        previous_runs(results), start, started_at)  # fmt: skip
        log.write()
        logger.info("%s: %d cells, %d to run, %d already done", suite.name, len(cells), len(todo),
                    len(kept))  # fmt: skip
        ref_todo = _cached_references(suite.name, ref_jobs, root, results, summary,
                                      data_dir=data_dir, retry=retry,
                                      rerun_failed=rerun_failed)  # fmt: skip

        def sweep(pending_references: list[PendingReference], todo_cells: list[Cell]) -> None:
            executor_cm, threads, in_flight = _executor(jobs, dask_address)
            _sweep(executor_cm, pending_references,
                   [(cell, cells_dir / cell.cell_id) for cell in todo_cells], summary, root=root,
                   results=results, on_progress=on_progress, in_flight=in_flight,
                   data_dir=data_dir, threads=threads, jax_cache=jax_cache)  # fmt: skip

        with log.recording(summary, ref_jobs):
            sweep(ref_todo, todo)
            _auto_rounds(suite, results, cells, summary, lambda todo: sweep([], todo),
                         retry=retry, rerun_failed=rerun_failed, **selection)  # fmt: skip
        return summary


@dataclass
class _SuiteLog:
    """Writes a sweep's ``suite.json``: the suite, its cells and configs, and its runs."""

    suite: Suite
    results: Path
    cells: list[Cell]
    references: bool
    configs: dict[str, Any]
    runs: list[dict[str, Any]]
    start: float
    started_at: str

    def write(self, summary: SweepSummary | None = None, interrupted: bool = False) -> None:
        """Before the sweep (no ``summary``): the earlier runs only; after it, this run among
        them, where it produced anything."""
        runs, wall_s = self.runs, None
        if summary is not None:
            wall_s = summary.wall_s = now() - self.start
            run = _run_entry(summary, self.started_at, interrupted)
            if run["cells_run"] or run["references_computed"]:
                runs = [*runs, run]
        write_suite_file(self.suite, self.results, self.cells, references=self.references,
                         configs=self.configs, wall_s=wall_s, runs=runs)  # fmt: skip

    @contextmanager
    def recording(self, summary: SweepSummary, jobs: list[ReferenceJob]) -> Iterator[None]:
        """Around the sweep: this run written into ``suite.json`` when it ends, interrupted
        or not (its references in job order when it ran to the end)."""
        try:
            yield
        except KeyboardInterrupt:
            self.write(summary, interrupted=True)
            raise
        _in_job_order(summary, jobs)
        self.write(summary)


def _probe_jobs(suite: Suite, jobs: int | None, dask_address: str | None) -> int | None:
    """The jobs of a sweep: a performance suite's probes time things, so by default one at a
    time, each with every core to itself, and never on a Dask cluster."""
    if suite.kind != "perf":
        return jobs
    if dask_address:
        raise ValueError(
            f"{suite.name} is a performance suite: its probes time this machine, so they run "
            "locally (drop --dask-address)"
        )
    if jobs is not None and jobs > 1:
        logger.warning(
            "%s: %d performance probes at once measure each other's load; the figures are "
            "only comparable with --jobs 1 (the default for performance suites)",
            suite.name,
            jobs,
        )
    return 1 if jobs is None else jobs


def _prepare_folder(
    suite: Suite, results: Path, cells: list[Cell], only: dict[str, set[str]] | None
) -> Path:
    """The results folder made ready under its lock: ``cells/``, staging left by a run that
    ended abruptly cleaned away, each data file's split rows written beside the results; a
    warning where the selection combines no cell. Returns ``cells/``."""
    cells_dir = results / "cells"
    cells_dir.mkdir(parents=True, exist_ok=True)
    for directory in (cells_dir, results / REFERENCES_DIR):
        clean_staging(directory)
    for entry in suite.datasets if suite.kind == "fit" else ():
        if entry.data_file is not None:  # the rows of each split, beside the results
            write_split_rows(results, entry.data_file)
    if not cells and only and any(only.values()):
        chosen = [f"{SELECTION_FLAGS[k]} {','.join(sorted(v))}" for k, v in only.items() if v]
        logger.warning(
            "%s: the suite has each value of %s, but no cell combines them: no cell to run",
            suite.name,
            " ".join(chosen),
        )
    return cells_dir


def _cached_references(
    suite_name: str,
    ref_jobs: list[ReferenceJob],
    root: Path,
    results: Path,
    summary: SweepSummary,
    **planning: Any,
) -> list[PendingReference]:
    """The references to compute; those cached (or skipped) are published into the results
    folder and counted in ``summary`` (``planning``: :func:`plan_references`'s keywords)."""
    if not ref_jobs:
        return []
    clean_staging(root)
    ref_todo, ref_done = plan_references(ref_jobs, root, **planning)
    for outcome in ref_done:
        publish_reference(outcome, root, results)
    summary.references.extend(ref_done)
    logger.info("%s: %d references, %d to compute, cache %s", suite_name, len(ref_jobs),
                len(ref_todo), root)  # fmt: skip
    return ref_todo


def _auto_rounds(
    suite: Suite,
    results: Path,
    cells: list[Cell],
    summary: SweepSummary,
    sweep: Callable[[list[Cell]], None],
    *,
    retry: bool,
    rerun_failed: bool,
    **selection: Any,
) -> None:
    """``seeds = "auto"``: the rounds of :mod:`~ppl_bnn.bench.auto_seeds`, each planned like a
    sweep's cells and run by ``sweep``, until a round adds no cell; ``cells`` grows by them."""
    while suite.auto_seeds is not None:
        known = {c.cell_id for c in cells}
        more = [c for c in more_cells(suite, results, **selection) if c.cell_id not in known]
        if not more:
            return
        cells.extend(more)
        todo, kept = plan(more, results / "cells", retry=retry, rerun_failed=rerun_failed)
        _count_kept(summary, kept)
        logger.info("%s: seeds = \"auto\": %d more cells for the undecided, %d to run",
                    suite.name, len(more), len(todo))  # fmt: skip
        sweep(todo)


def _count_kept(summary: SweepSummary, kept: list[dict[str, Any]]) -> SweepSummary:
    """``summary``, with the records of cells kept from an earlier run counted in."""
    for record in kept:
        summary.statuses[record["status"]] += 1
        summary.skipped_statuses[record["status"]] += 1
        if record["status"] in FAILED:
            summary.failed_cells.append(record["cell_id"])
    return summary


def _run_entry(summary: SweepSummary, started_at: str, interrupted: bool) -> dict[str, Any]:
    """What ``suite.json`` keeps of one run: when, how long, and what it produced."""
    return {
        "started_at": started_at,
        "finished_at": timestamp(),
        "wall_s": round(summary.wall_s, 3),
        "cells_run": sum(summary.ran.values()),
        "references_computed": sum(r.source == "computed" for r in summary.references),
        "interrupted": interrupted,
    }


def run_references(
    suite: Suite,
    *,
    reference_dir: str | Path | None = None,
    jobs: int | None = None,
    data_dir: str | None = None,
    max_splits: int | None = None,
    only: dict[str, set[str]] | None = None,
    retry: bool = True,
    rerun_failed: bool = False,
) -> SweepSummary:
    """Compute the suite's reference posteriors that are not cached, into the cache only (no
    cells, no results folder); their outcomes are in the summary's ``references``.

    Args:
        suite: A suite with a ``[reference]`` table.
        reference_dir: The cache root (see :func:`ppl_bnn.reference.cache_root`).
        jobs: References at once (default: the number of cores).
        data_dir, max_splits, only, retry, rerun_failed: As for :func:`run_suite`.
    """
    if suite.reference is None:
        raise ValueError(f"suite {suite.name!r} has no [reference] table: nothing to compute")
    check_jobs(jobs)
    start = now()
    root = cache_root(reference_dir)
    clean_staging(root)
    ref_jobs = suite.references(max_splits=max_splits, data_dir=data_dir, only=only)
    todo, done = plan_references(
        ref_jobs, root, data_dir=data_dir, retry=retry, rerun_failed=rerun_failed
    )
    summary = SweepSummary(references=done)
    logger.info("%s: %d references, %d to compute, cache %s", suite.name, len(ref_jobs),
                len(todo), root)  # fmt: skip
    executor_cm, threads, in_flight = _executor(jobs, None)
    _sweep(
        executor_cm, todo, [], summary, root=root, results=None, data_dir=data_dir,
        threads=threads, in_flight=in_flight,
    )  # fmt: skip
    _in_job_order(summary, ref_jobs)
    summary.wall_s = now() - start
    return summary


def _in_job_order(summary: SweepSummary, jobs: list[ReferenceJob]) -> None:
    order = {job.name: i for i, job in enumerate(jobs)}
    summary.references.sort(key=lambda outcome: order[outcome.name])
