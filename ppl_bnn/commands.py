"""What each ``ppl-bnn`` command does, once :mod:`ppl_bnn.cli` has parsed its arguments: the
numerical stack is imported here, so that ``ppl-bnn --help`` and argument errors answer at
once."""

from __future__ import annotations

import argparse
import logging
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from ppl_bnn.bench import load_suite, run_suite
from ppl_bnn.bench.runner import SweepSummary, run_references
from ppl_bnn.bench.schema import check_name
from ppl_bnn.bench.suite import SuiteError
from ppl_bnn.bench.suite_file import current_configs
from ppl_bnn.cli import method_options, show
from ppl_bnn.compare import DEFAULT_NAME, ComparisonFailedError, FailedCellsWarning, compare
from ppl_bnn.comparison import Comparison
from ppl_bnn.data import dataset_names, fetch, resolve_data_dir
from ppl_bnn.data.files import DataFileError, Table, read_inputs
from ppl_bnn.data.splits import read_tables
from ppl_bnn.defaults import MAX_ATTEMPTS
from ppl_bnn.model.bnn import BNN
from ppl_bnn.prediction_table import prediction_columns, prediction_table
from ppl_bnn.reference import describe_reference
from ppl_bnn.report import recommendation_lines, render_report, report_is_current
from ppl_bnn.report.live import LiveReport

logger = logging.getLogger("ppl_bnn.cli")

#: What the command line says of failures it may run again.
RETRY_ADVICE = (
    f"the same command runs each again until it has had {MAX_ATTEMPTS} runs; --rerun-failed "
    "after that"
)


def comma_set(text: str) -> set[str]:
    """The distinct items of a comma-separated list."""
    return {part.strip() for part in text.split(",") if part.strip()}


def comma_list(text: str | None) -> list[str] | None:
    """A comma-separated list in its order (None for None)."""
    if text is None:
        return None
    return list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))


def _results_dir(args: argparse.Namespace) -> Path:
    return Path(args.reports_dir) / args.suite_name


def bench(args: argparse.Namespace) -> int:
    """``ppl-bnn bench``: run a suite (resumable), render its report, print its answer."""
    suite = load_suite(args.suite)
    args.suite_name = suite.name
    results = _results_dir(args)
    only = {
        "dataset": comma_set(args.datasets) if args.datasets else set(),
        "method": comma_set(args.methods) if args.methods else set(),
        "backend": comma_set(args.backends) if args.backends else set(),
    }
    jax_cache = None if args.no_jax_cache else str(Path(args.reports_dir) / ".jax-cache")
    # The report so far, kept current while the cells run; rendered whole at the end.
    live = None if args.no_report else LiveReport(results)
    try:
        summary = run_suite(
            suite,
            results,
            jobs=args.jobs,
            dask_address=args.dask_address,
            data_dir=str(resolve_data_dir(args.data_dir)),
            max_splits=args.splits,
            only=only,
            retry=not args.no_retry,
            rerun_failed=args.rerun_failed,
            force=args.force,
            jax_cache=jax_cache,
            references=not args.no_reference,
            reference_dir=args.reference_dir,
            wait=args.wait,
            on_progress=None if live is None else live.update,
        )
    finally:
        if live is not None:
            live.close()
    _log_references(summary)
    logger.info("%s: %s; %.0f s", suite.name, _describe_cells(summary), summary.wall_s)
    ran = sum(summary.ran.values())
    computed = [r for r in summary.references if r.source == "computed"]
    if args.no_report:
        pass
    elif not ran and not computed and report_is_current(results):
        logger.info("nothing ran: the report %s is current (`ppl-bnn report` renders it again)",
                    results / "index.html")  # fmt: skip
    else:
        render_report(results)
    if not args.no_report:
        _print_recommendations(results)
    failed = False
    if summary.failed_references:
        # A missing reference loses the comparisons with it, not the cells' results; the sweep
        # still did not do all it was asked to (status 1, as for a failed cell).
        missing = ", ".join(summary.failed_references)
        logger.error("references that failed or timed out: %s (their fidelity comparisons are "
                     "missing; %s)", missing, RETRY_ADVICE)  # fmt: skip
        failed = True
    if not summary.ok:
        logger.error("cells that failed or timed out: %s (%s)", ", ".join(summary.failed_cells),
                     RETRY_ADVICE)  # fmt: skip
        failed = True
    return 1 if failed else 0


def _describe_cells(summary: SweepSummary) -> str:
    """``4 ok, 1 failed; 2 skipped as already done``: the cells that ran by status, then those
    skipped (by status too where some of them are not ``ok``)."""

    def counts(statuses: Counter) -> str:
        return ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))

    if not summary.statuses:
        return "no cells"
    kept = summary.skipped_statuses
    line = f"{counts(summary.ran) or 'no cell ran'}; {summary.skipped} skipped as already done"
    return f"{line} ({counts(kept)})" if set(kept) - {"ok"} else line


def _log_references(summary: SweepSummary) -> None:
    for outcome in summary.references:
        level = logging.WARNING if outcome.failed else logging.INFO
        line = describe_reference(outcome.document)
        logger.log(level, "reference %s: %s, %s", outcome.name, outcome.source, line)


def reference(args: argparse.Namespace) -> int:
    """``ppl-bnn reference``: compute a suite's reference posteriors into their cache."""
    suite = load_suite(args.suite)
    summary = run_references(
        suite,
        reference_dir=args.reference_dir,
        jobs=args.jobs,
        data_dir=str(resolve_data_dir(args.data_dir)),
        max_splits=args.splits,
        only={"dataset": comma_set(args.datasets)} if args.datasets else None,
        retry=not args.no_retry,
        rerun_failed=args.rerun_failed,
    )
    _log_references(summary)
    if summary.failed_references:
        logger.error("references that failed or timed out: %s (%s)",
                     ", ".join(summary.failed_references), RETRY_ADVICE)  # fmt: skip
        return 1
    return 0


def _print_recommendations(report_dir: Path) -> None:
    """The report's answer on stdout, one line per dataset."""
    for line in recommendation_lines(report_dir):
        show(line)


def report(args: argparse.Namespace) -> int:
    """``ppl-bnn report``: render a suite's report again from its stored results."""
    configs = None
    try:
        suite = load_suite(args.suite)
    except SuiteError:
        args.suite_name = check_name(f"--suite {args.suite}", Path(args.suite).stem)
    else:
        args.suite_name = suite.name
        # The stored cells are checked against the suite file as it is now, not as it last ran.
        hashes = current_configs(suite, str(resolve_data_dir(None)))
        configs = None if hashes is None else (hashes, f"{args.suite}, as it is now")
    results = _results_dir(args)
    if not (results / "cells").is_dir():
        logger.error("no stored results in %s: run `ppl-bnn bench --suite %s` first", results,
                     args.suite)  # fmt: skip
        return 2
    index = render_report(results, configs=configs)  # it logs where the report went
    _print_recommendations(index.parent)
    return 0


def compare_file(args: argparse.Namespace) -> int:
    """``ppl-bnn compare``: read the data file(s), build the network on them and run
    :func:`ppl_bnn.compare` on those files."""
    # Read once: the cells read the same files, checked by their SHA-256.
    table, held = read_tables(
        str(Path(args.data).resolve()), target=args.target, features=comma_list(args.features),
        task=args.task, test_path=None if args.test is None else str(Path(args.test).resolve()),
    )  # fmt: skip
    test = None if held is None else (held.x, held.y)
    # Rows to predict at are read first, so that a wrong file stops before any fitting.
    to_predict = _rows_to_predict(args, table) if args.predict is not None else None
    network = {"hidden": args.hidden, "activation": args.activation}
    x = pd.DataFrame(table.x, columns=list(table.features))  # the file's column names kept
    if table.task == "classification":
        model = BNN(x, table.y, likelihood="categorical", num_classes=len(table.classes),
                    **network)  # fmt: skip
    else:
        model = BNN(x, table.y, noise=args.noise, **network)
    # The file's name labels the data, unless it is not a plain name or names a catalogue set.
    stem = Path(args.data).stem
    name = stem if stem.replace("-", "").replace("_", "").isalnum() else DEFAULT_NAME
    name = f"{name}-file" if name in dataset_names() else name
    failure = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FailedCellsWarning)
        try:
            comparison = compare(
                model,
                test=test,
                test_fraction=args.test_fraction,
                splits=args.splits,
                methods=comma_list(args.methods),
                backends=comma_list(args.backends),
                seeds=args.seeds,
                reference={"auto": "auto", "yes": True, "no": False}[args.reference],
                tune={"auto": "auto", "no": False}[args.tune],
                options=method_options(args.option),
                jobs=args.jobs,
                results_dir=args.out,
                timeout_s=args.timeout,
                name=name,
                reference_dir=args.reference_dir,
                retry=not args.no_retry,
                rerun_failed=args.rerun_failed,
                tables=(table, held),
            )
        except ComparisonFailedError as err:
            comparison, failure = err.comparison, err
    comparison.report()  # it logs where the report went, or that it was current
    show(comparison.summary)
    failed = [w.message for w in caught if isinstance(w.message, FailedCellsWarning)]
    for other in (w for w in caught if not isinstance(w.message, FailedCellsWarning)):
        warnings.showwarning(other.message, other.category, other.filename, other.lineno)
    for failures in [failure] if failure else failed:
        logger.error("%s", failures.describe("run the same command again", "--rerun-failed"))
    predicted = to_predict is None or _write_predictions(args, table, comparison, *to_predict)
    return 1 if failure or failed or not predicted else 0


def _rows_to_predict(args: argparse.Namespace, table: Table) -> tuple[np.ndarray, pd.DataFrame]:
    """``--predict``'s inputs (the training file's feature columns) and its rows as read."""
    x, rows = read_inputs(args.predict, table.features)
    clash = set(prediction_columns(table.target, table.classes)) & set(rows.columns)
    if clash:
        raise DataFileError(
            f"{args.predict}: its columns {sorted(clash)} would be overwritten by the "
            "predictions; rename them"
        )
    return x, rows


def _write_predictions(
    args: argparse.Namespace, table: Table, comparison: Comparison, x: np.ndarray,
    rows: pd.DataFrame,
) -> bool:  # fmt: skip
    """Predict ``x`` with the recommended fit and write it beside ``rows``; False (logged) where
    nothing is recommended."""
    try:
        fit = comparison.recommended
    except ValueError as err:
        logger.error("no predictions written: %s", err)
        return False
    table_out = prediction_table(fit.predict(x), table.target, table.classes)
    out = Path(
        args.predictions or comparison.results_dir / f"predictions-{Path(args.predict).stem}.csv"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.concat([rows, table_out], axis=1).to_csv(out, index=False)
    logger.info("%d predictions of %s written to %s", len(rows), fit.method, out)
    show(f"predictions: {out}")
    return True


def fetch_data(args: argparse.Namespace) -> int:
    """``ppl-bnn data fetch``: download a data group and verify its checksums."""
    written = fetch(args.group, args.url, args.data_dir)
    logger.info("%s: %d files downloaded; every file present and verified", args.group,
                len(written))  # fmt: skip
    return 0
