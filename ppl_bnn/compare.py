"""``compare``: the benchmark's verdict on your own model and data.

It is the suite runner on one dataset: the model's data (and test set) are made into the
suite's data file in memory, every split checked, and written once to an NPZ file in the
results folder, which the cells read (:func:`~ppl_bnn.bench.data_files.arrays_data_file`; the
command line hands over the file it read instead). The suite is built on that data file and
the model's serialised form (:func:`~ppl_bnn.bench.cell.model_table`), and
:func:`ppl_bnn.bench.runner.run_suite` runs it, with everything the suites have: a process per
cell with a timeout, resume, the results folder's lock, the compilation and reference caches,
tuning on a validation split and a reference posterior with its own floor. The verdict is read
back as a :class:`~ppl_bnn.comparison.Comparison`.

As in the suites, inputs and regression targets are standardised with the training split's
statistics before fitting (a known ``noise`` is in those units); metrics are in original units.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppl_bnn.bench.cell import model_table
from ppl_bnn.bench.data_files import (
    DATA_DIR,
    DEFAULT_TEST_FRACTION,
    DataFile,
    arrays_data_file,
    data_file_of,
    data_name_problem,
)
from ppl_bnn.bench.lock import LOCK_FILE
from ppl_bnn.bench.record import REPLACED_DIR, SUITE_FILE, attempts_made, read_record
from ppl_bnn.bench.runner import FITS_DIR, SweepSummary, run_suite
from ppl_bnn.bench.suite import AUTO, Suite, parse_suite
from ppl_bnn.bench.tuning import TUNING_GRIDS
from ppl_bnn.comparison import Comparison
from ppl_bnn.data.files import Table, file_sha256
from ppl_bnn.defaults import DEFAULT_METHODS, MAX_ATTEMPTS
from ppl_bnn.engine.registry import DEFAULT_BACKEND, backend_names
from ppl_bnn.files import write_atomic
from ppl_bnn.keys import content_key
from ppl_bnn.methods import METHODS, available, get_method, make_options
from ppl_bnn.methods.memory import check_memory
from ppl_bnn.model.bnn import BNN
from ppl_bnn.model.spec import BNNSpec
from ppl_bnn.reference import REFERENCE_BACKEND, REFERENCES_DIR, ReferenceSettings
from ppl_bnn.report import CSV_FILE, FIGURES_DIR, HTML_FILE, MARKDOWN_FILE, STATE_FILE, SUMMARY_FILE
from ppl_bnn.report.equivalence import Margins
from ppl_bnn.report.memo import CACHE_DIR

logger = logging.getLogger(__name__)

#: ``reference="auto"`` samples a reference posterior where its chain ensemble resolves within
#: its budget (wine-quality-red's 937k weights x points take about 2 minutes a batch of 16 MCLMC
#: chains on 2 cores, docs/benchmarks/reference.md): at most this many weights ...
AUTO_REFERENCE_WEIGHTS = 2_000
#: ... and at most this many (weights x training points), a gradient's cost.
AUTO_REFERENCE_WORK = 1_000_000
#: Where results folders go without ``results_dir``: ``reports/compare-<name>-<key>``.
DEFAULT_ROOT = Path("reports")
#: JAX's persistent compilation cache of a comparison's cells, in its results folder.
JAX_CACHE_DIR = ".jax-cache"
#: The dataset's label without ``name=``.
DEFAULT_NAME = "data"
#: What a results folder holds: a non-empty folder of anything else is refused as
#: ``results_dir`` (it is not a comparison's; ``compare`` would write into it).
RESULTS_ENTRIES = frozenset({
    SUITE_FILE, "cells", REFERENCES_DIR, DATA_DIR, FITS_DIR, REPLACED_DIR, LOCK_FILE,
    JAX_CACHE_DIR, HTML_FILE, MARKDOWN_FILE, CSV_FILE, SUMMARY_FILE, FIGURES_DIR, STATE_FILE,
    str(CACHE_DIR),
})  # fmt: skip


class CellFailures:
    """The cells of a comparison that failed or timed out: :attr:`cells`, one line each (its
    status, its runs and its error), and whether any has runs left (:attr:`runs_left`)."""

    def __init__(self, cells: list[str], runs_left: bool) -> None:
        self.cells, self.runs_left = cells, runs_left

    def describe(
        self,
        again: str = "run the comparison again",
        rerun: str = "pass rerun_failed=True",
    ) -> str:
        """The failures in words; ``again`` and ``rerun`` say how to retry them."""
        advice = (
            f"{again} to retry those with runs left"
            if self.runs_left
            else f"each has had its runs: {rerun} to run them again"
        )
        return f"{len(self.cells)} cells failed or timed out ({advice}):\n" + "\n".join(self.cells)


class FailedCellsWarning(UserWarning, CellFailures):
    """Some cells of a comparison failed or timed out: its verdict is without them."""

    def __init__(self, cells: list[str], runs_left: bool) -> None:
        CellFailures.__init__(self, cells, runs_left)
        super().__init__(self.describe())


class ComparisonFailedError(RuntimeError, CellFailures):
    """No cell of a comparison produced a result. Its records stay in the results folder, and
    :attr:`comparison` reads them (``comparison.report()`` renders them)."""

    def __init__(self, cells: list[str], runs_left: bool, comparison: Comparison) -> None:
        CellFailures.__init__(self, cells, runs_left)
        super().__init__("no cell produced a result: " + self.describe())
        self.comparison = comparison


@dataclass(frozen=True)
class _Plan:
    """A checked comparison, before anything is written: where, the data as made in memory
    (the files' bytes, and the data file the suite reads them as) and the suite's table."""

    results_dir: Path
    files: dict[Path, bytes]
    data_file: DataFile
    table: dict[str, Any]


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{what} must be a positive integer, got {value!r}")
    return int(value)


def _seeds(seeds: int | Sequence[int] | str) -> list[int] | str:
    if seeds == AUTO:
        return AUTO
    if isinstance(seeds, int | np.integer) and not isinstance(seeds, bool):
        return list(range(_count(seeds, "seeds")))
    values = list(seeds) if isinstance(seeds, Sequence) and not isinstance(seeds, str) else None
    if not values or not all(
        isinstance(s, int | np.integer) and not isinstance(s, bool) and s >= 0 for s in values
    ):
        raise ValueError(
            f'seeds must be a count, a list of non-negative integers or "auto", got {seeds!r}'
        )
    if len(set(values)) != len(values):
        raise ValueError(f"seeds must be distinct, got {seeds!r}")
    return [int(s) for s in values]


def _names(values: object, known: Sequence[str], what: str) -> list[str]:
    items = [values] if isinstance(values, str) else values
    if not isinstance(items, Sequence) or not items:
        raise ValueError(f"{what} must be a non-empty list of names, got {values!r}")
    unknown = [v for v in items if v not in known]
    if unknown:
        raise ValueError(f"unknown {what} {unknown}; available: {', '.join(known)}")
    if len(set(items)) != len(items):
        raise ValueError(f"{what} must be distinct, got {list(items)}")
    return list(items)


def _num_weights(spec: BNNSpec) -> int:
    return sum(site.size for site in spec.sites())


def _reference_table(
    reference: object, spec: BNNSpec, n_train: int
) -> tuple[dict[str, Any] | None, str | None]:
    """The suite's ``[reference]`` table (None for none), and why ``"auto"`` samples none
    (the dataset's ``no_reference``)."""
    if reference is False:
        return None, None
    if isinstance(reference, Mapping):
        ReferenceSettings(**reference)  # unknown keys raise TypeError here, not in a worker
        return dict(reference), None
    if reference is True:
        return {}, None
    if reference != "auto":
        raise ValueError(
            f'reference must be "auto", True, False or a mapping of NUTS settings '
            f"({', '.join(ReferenceSettings().as_dict())}), got {reference!r}"
        )
    weights = _num_weights(spec)
    if weights > AUTO_REFERENCE_WEIGHTS or weights * n_train > AUTO_REFERENCE_WORK:
        # The dataset's reference job is then infeasible, and the Summary says why.
        return {}, (
            f"{weights:,} weights and {n_train:,} training points: beyond what "
            f'reference="auto" samples (at most {AUTO_REFERENCE_WEIGHTS:,} weights '
            f"and {AUTO_REFERENCE_WORK:,} weights x points); pass reference=True to sample one"
        )
    return {}, None


def _method_tables(
    methods: list[str],
    backend: str,
    tune: object,
    options: Mapping[str, Mapping[str, Any]] | None,
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """``[methods.*]`` tables and the ``exclude`` entries: with ``tune="auto"`` each method whose
    default does not hold on every set runs tuned only, on its grid
    (:data:`~ppl_bnn.bench.tuning.TUNING_GRIDS`)."""
    if tune not in ("auto", False):
        raise ValueError(f'tune must be "auto" or False, got {tune!r}')
    options = dict(options or {})
    stray = sorted(set(options) - set(methods))
    if stray:
        raise ValueError(f"options given for {stray}, which are not among the methods {methods}")
    tables: dict[str, dict[str, Any]] = {m: dict(options.get(m, {})) for m in methods}
    exclude = []
    for method in methods:
        entry = get_method(method, backend)
        given = set(entry.tuned_by_default) & set(tables[method])
        grid = TUNING_GRIDS.get(entry.name)
        if tune == "auto" and grid and not given:
            tables[method]["tune"] = {"grid": {k: list(v) for k, v in grid.items()}}
            exclude.append(f"{method}.untuned")
    return tables, exclude


def _arrays(model: BNN, test: object) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The training arrays and the test arrays (none without ``test``), checked."""
    if not isinstance(model, BNN):
        raise TypeError(f"compare takes a ppl_bnn.BNN (the network and its data), got {model!r}")
    names = {} if model.feature_names is None else {"names": np.array(model.feature_names)}
    arrays = {"x": model.x, "y": model.y, **names}
    if test is None:
        return arrays, {}
    x_test, y_test = model.held_out(test, "test")
    return arrays, {"x": x_test, "y": y_test, **names}


def _check_results_dir_to_write(root: Path) -> None:
    """Refuse a ``results_dir`` that exists but is no folder, or that holds anything a results
    folder does not (:data:`RESULTS_ENTRIES`; staging and temporary files aside): ``compare``
    writes into it, so it must be new, empty or a comparison's."""
    if not root.exists():
        return
    if not root.is_dir():
        raise NotADirectoryError(f"results_dir {root} is a file, not a folder")
    names = {path.name for path in root.iterdir()}
    if SUITE_FILE in names or "cells" in names:
        return
    stray = sorted(name for name in names if name not in RESULTS_ENTRIES and "~" not in name)
    if stray:
        shown = ", ".join(stray[:5]) + (f" and {len(stray) - 5} more" if len(stray) > 5 else "")
        raise ValueError(
            f"results_dir {root} is not empty and is not a comparison's results folder (it "
            f"holds {shown}): give a new or empty folder, or one a comparison wrote"
        )


def _fitting_methods(given: Sequence[str] | None, spec: BNNSpec) -> list[str]:
    """The methods ``given`` (checked), or the default ones, less those built on a mode where
    the prior is hierarchical (its log joint has none): dropped from the default list with a
    log line, a ``ValueError`` where given."""
    methods = _names(DEFAULT_METHODS if given is None else given, list(available()), "methods")
    if spec.hierarchical_prior is None:
        return methods
    on_modes = {m.name for m in METHODS if m.needs_mode}
    moded = [m for m in methods if m in on_modes]
    if moded and given is not None:
        raise ValueError(
            f"methods {moded} are built on a mode of the log joint, which the hierarchical "
            f"prior {spec.hierarchical_prior!r} leaves without one: drop them"
        )
    if moded:
        logger.info("hierarchical prior: leaving out %s, built on a mode", ", ".join(moded))
    return [m for m in methods if m not in moded]


def _check_memory(
    spec: BNNSpec,
    methods: list[str],
    backends: list[str],
    options: Mapping[str, Mapping[str, Any]],
    reference: dict[str, Any] | None,
    n_train: int,
) -> None:
    """``InsufficientMemoryError`` where a contestant's fit (or the reference's NUTS) needs
    more memory than is available, at the least (:mod:`ppl_bnn.methods.memory`)."""
    runs = [(m, b, options.get(m, {})) for m in methods for b in backends if b in available()[m]]
    if reference is not None:  # every chain's draws are held at the end
        settings = ReferenceSettings(**reference)
        whole = {**settings.engine_options(), "num_chains": settings.num_chains}
        runs.append((settings.engine, REFERENCE_BACKEND, whole))
    for method, backend, given in runs:
        made = make_options(get_method(method, backend), dict(given), backend=backend)
        check_memory(method, spec, made, n_train)


def plan_comparison(
    model: BNN,
    *,
    test: tuple[object, object] | None = None,
    test_fraction: float | None = None,
    splits: int = 1,
    methods: Sequence[str] | None = None,
    backends: Sequence[str] = (DEFAULT_BACKEND,),
    seeds: int | Sequence[int] | str = 3,
    reference: object = "auto",
    tune: object = "auto",
    options: Mapping[str, Mapping[str, Any]] | None = None,
    results_dir: str | os.PathLike[str] | None = None,
    timeout_s: float = 600.0,
    name: str = DEFAULT_NAME,
    margins: Mapping[str, float] | Margins | None = None,
    tables: tuple[Table, Table | None] | None = None,
) -> _Plan:
    """Check every argument and build the suite's table; nothing is written. See
    :func:`compare` for the arguments."""
    arrays, test_arrays = _arrays(model, test)
    problem = data_name_problem(name)
    if problem is not None:
        raise ValueError(f"name {problem}: call the data something else, e.g. 'my-data'")
    splits = _count(splits, "splits")
    if test is not None and (test_fraction is not None or splits != 1):
        raise ValueError("with test=(x, y) there is one split: drop test_fraction and splits")
    fraction = DEFAULT_TEST_FRACTION if test_fraction is None else test_fraction
    if test is None and not (isinstance(fraction, float | int) and 0 < fraction < 1):
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    method_list = _fitting_methods(methods, model.spec)
    backend_list = _names(list(backends), list(backend_names()), "backends")
    if not (isinstance(timeout_s, int | float) and 0 < timeout_s < float("inf")):
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    margin_table = Margins.of(dict(margins) if isinstance(margins, Mapping) else margins)
    spec = model.spec
    split_text = "given" if test is not None else f"{fraction}x{splits}"
    key = content_key(name, spec.to_dict(), arrays, test_arrays, split_text)
    default_root = DEFAULT_ROOT / f"compare-{name}-{key[:8]}"
    root = Path(results_dir) if results_dir is not None else default_root
    _check_results_dir_to_write(root)
    fraction = None if test is not None else float(fraction)
    if tables is None:
        # Named by content, so that a rerun finds the file it wrote; every split made, checked.
        data_file, files = arrays_data_file(
            name, (root / DATA_DIR / f"{name}-{key[:12]}.npz").resolve(), arrays,
            test_arrays or None,
            num_classes=spec.num_classes if spec.likelihood == "categorical" else None,
            test_fraction=fraction, splits=splits,
        )  # fmt: skip
    else:
        data_file, files = _read_data_file(name, tables, model, test, fraction, splits), {}
    n_train = max(len(info["train_rows"]) for info in data_file.split_info)
    reference_table, no_reference = _reference_table(reference, spec, n_train)
    method_tables, exclude = _method_tables(method_list, backend_list[0], tune, options)
    sampled = reference_table if no_reference is None else None
    _check_memory(spec, method_list, backend_list, options or {}, sampled, n_train)
    dataset: dict[str, Any] = {"name": name}
    if data_file.image_shape is not None:
        dataset["image"] = True
    if exclude:
        dataset["exclude"] = exclude
    if no_reference is not None:
        dataset["no_reference"] = no_reference
    table: dict[str, Any] = {
        "name": name,  # the report's title
        "description": f"compare() on {name}: {len(arrays['y'])} points",
        "seeds": _seeds(seeds),
        "backends": backend_list,
        "timeout_s": float(timeout_s),
        "model": model_table(spec),
        "datasets": [dataset],
        "methods": method_tables,
        "margins": margin_table.as_dict(),
    }
    if reference_table is not None:
        table["reference"] = reference_table
    return _Plan(root, files, data_file, table)


def _read_data_file(
    name: str,
    tables: tuple[Table, Table | None],
    model: BNN,
    test: object,
    fraction: float | None,
    splits: int,
) -> DataFile:
    """The data file(s) the model's data were read from as the suite's data file: ``ValueError``
    unless they hold the model's data (and the test set's, where one is given)."""
    table, held = tables
    if table.x.shape != model.x.shape or (held is None) != (test is None):
        raise ValueError(
            f"tables must be the data file(s) the model's data were read from: {table.path} "
            f"holds inputs of shape {table.x.shape}, the model {model.x.shape}"
            + ("" if (held is None) == (test is None) else ", and test= and its test file differ")
        )
    given = {"target": table.target, "features": table.features, "classes": table.classes}
    return data_file_of(name, table, held, given, test_fraction=fraction, splits=splits)


def write_data(plan: _Plan) -> Suite:
    """Write the plan's data files, the data the cells read, where the results folder holds no
    exact copy of them (a copy that differs, say altered by hand, is rewritten from the data
    given, with a warning), and build the suite on them. Where the suite is refused (a
    method's option, say), what this call wrote goes: the results folder, if it made it, else
    the new files."""
    new_folder = not plan.results_dir.exists()
    new_files = []
    try:
        for path, data in plan.files.items():
            if path.exists() and file_sha256(path) == hashlib.sha256(data).hexdigest():
                continue
            if path.exists():
                logger.warning("%s does not hold the data given (altered since it was written, "
                               "or damaged): written again from the data", path)  # fmt: skip
            else:
                new_files.append(path)
            write_atomic(path, lambda tmp, data=data: Path(tmp).write_bytes(data))
        return parse_suite(
            plan.table, where="compare", data_files={plan.data_file.name: plan.data_file}
        )
    except BaseException:
        if new_folder:
            shutil.rmtree(plan.results_dir, ignore_errors=True)
        else:
            for path in new_files:
                path.unlink(missing_ok=True)
        raise


def _check_outcome(comparison: Comparison, run: SweepSummary) -> None:
    """Raise :class:`ComparisonFailedError` where no cell produced a result, and warn
    (:class:`FailedCellsWarning`) where some failed: each named with its error and its runs."""
    if not run.failed_cells:
        return
    lines, runs_left = [], False
    for cell_id in run.failed_cells:
        record = read_record(comparison.results_dir / "cells" / cell_id) or {}
        error = record.get("error") or {}
        runs = attempts_made(record)
        runs_left |= runs < MAX_ATTEMPTS
        why = f"{error.get('type')}: {error.get('message')}"
        status = record.get("status", "failed")
        lines.append(f"{cell_id}: {status} after {runs} of {MAX_ATTEMPTS} runs ({why})")
    if len(lines) == sum(run.statuses.values()):
        raise ComparisonFailedError(lines, runs_left, comparison)
    warnings.warn(FailedCellsWarning(lines, runs_left), stacklevel=3)


def compare(
    model: BNN,
    *,
    test: tuple[object, object] | None = None,
    test_fraction: float | None = None,
    splits: int = 1,
    methods: Sequence[str] | None = None,
    backends: Sequence[str] = (DEFAULT_BACKEND,),
    seeds: int | Sequence[int] | str = 3,
    reference: object = "auto",
    tune: object = "auto",
    options: Mapping[str, Mapping[str, Any]] | None = None,
    jobs: int | None = None,
    results_dir: str | os.PathLike[str] | None = None,
    timeout_s: float = 600.0,
    name: str = DEFAULT_NAME,
    reference_dir: str | os.PathLike[str] | None = None,
    retry: bool = True,
    rerun_failed: bool = False,
    margins: Mapping[str, float] | Margins | None = None,
    tables: tuple[Table, Table | None] | None = None,
) -> Comparison:
    """Fit ``model`` by every method and compare them: the benchmark's verdict on your data.

    Each (method, backend, split, seed) is a cell, run in its own warm worker process with a
    timeout; a results folder holding finished cells of the same comparison resumes. No
    ``if __name__ == "__main__":`` guard is needed. Every argument, the splits and the memory
    each fit needs are checked before anything is written or started. The guide:
    ``docs/guide/compare.md``.

    Example:
        >>> import numpy as np
        >>> from ppl_bnn import BNN, compare
        >>> x = np.random.default_rng(0).normal(size=(200, 3))
        >>> model = BNN(x, x @ [1.0, -2.0, 0.5] + np.sin(x[:, 0]), hidden=(20,), noise="learned")
        >>> comparison = compare(model, methods=["map", "svi", "nuts"])  # doctest: +SKIP

    Args:
        model: The network and its training data (flat inputs or images).
        test, test_fraction, splits: A held-out ``(x_test, y_test)``; without it, a seeded
            random fraction (default 0.1, stratified by class) of the data is held out in each
            of ``splits`` splits.
        methods: The contestants; default :data:`~ppl_bnn.defaults.DEFAULT_METHODS`.
        backends: Any of :func:`ppl_bnn.engine.registry.backend_names`.
        seeds: A count (seeds 0..n-1), the seeds, or ``"auto"``: 0-2, then more for the
            contestants they cannot decide, up to 10 (:mod:`ppl_bnn.bench.auto_seeds`).
        reference: ``"auto"`` (a reference posterior, :mod:`ppl_bnn.reference`, for networks
            within :data:`AUTO_REFERENCE_WEIGHTS` and :data:`AUTO_REFERENCE_WORK`), ``True``,
            ``False`` or a mapping of :class:`~ppl_bnn.reference.ReferenceSettings`.
        tune: ``"auto"``: a method whose default does not hold on every data set (MC dropout's
            rate) is tuned on a validation split of each training set, unless ``options``
            sets that option; ``False``: as given.
        options: Method -> options for ``fit`` (e.g. ``{"svi": {"num_steps": 5000}}``).
        jobs, timeout_s: Cells at once (default: the cores), and each cell's time limit.
        results_dir: Default ``reports/compare-<name>-<hash of name, spec, data and split>``.
        name: The dataset's label: the report's title, and part of the default folder.
        reference_dir: The reference cache (:func:`ppl_bnn.reference.cache_root`).
        retry, rerun_failed: Run failed cells and references again up to
            :data:`~ppl_bnn.defaults.MAX_ATTEMPTS` runs each (False: keep the failures), or
            however many runs they have had.
        margins: How close counts as "as good" (:class:`~ppl_bnn.report.equivalence.Margins`).
        tables: The data and test files the model's data came from
            (:func:`ppl_bnn.data.splits.read_tables`): cells read those, checked by SHA-256.

    Returns:
        The :class:`~ppl_bnn.comparison.Comparison` (``.table``, ``.summary``, ``.report()``,
        ``.results``); a :class:`FailedCellsWarning` names the cells that failed or timed out.

    Raises:
        TypeError, ValueError: a bad argument, a ``results_dir`` holding other files, or a
            split no fit can use; ``ppl_bnn.methods.memory.InsufficientMemoryError``: a fit
            needs more memory than there is (both before anything is written or run).
        ComparisonFailedError: no cell produced a result.
    """
    plan = plan_comparison(
        model, test=test, test_fraction=test_fraction, splits=splits, methods=methods,
        backends=backends, seeds=seeds, reference=reference, tune=tune, options=options,
        results_dir=results_dir, timeout_s=timeout_s, name=name, margins=margins, tables=tables,
    )  # fmt: skip
    return _run_comparison(plan, jobs, reference_dir, retry=retry, rerun_failed=rerun_failed)


def _run_comparison(
    plan: _Plan, jobs: int | None, reference_dir: str | os.PathLike[str] | None, **retries: bool
) -> Comparison:
    """Write the plan's data and run its suite (compiled programs cached in the results folder:
    a rerun compiles nothing again); the comparison, checked for failed cells."""
    logger.info("compare: results in %s", plan.results_dir)
    suite = write_data(plan)
    run = run_suite(
        suite, plan.results_dir, jobs=jobs, reference_dir=reference_dir,
        jax_cache=str((plan.results_dir / JAX_CACHE_DIR).resolve()), **retries,
    )  # fmt: skip
    logger.info("compare: %s in %.1f s", dict(run.statuses), run.wall_s)
    comparison = Comparison(plan.results_dir)
    _check_outcome(comparison, run)
    return comparison
