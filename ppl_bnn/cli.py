"""The ``ppl-bnn`` command: run benchmark suites, render reports, fetch data.

::

    ppl-bnn bench [--suite default] [--jobs N | --dask-address tcp://...] [--splits K]
    ppl-bnn report [--suite default]
    ppl-bnn data fetch uci --url URL [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from ppl_bnn.bench import load_suite, run_suite
from ppl_bnn.bench.suite import SuiteError
from ppl_bnn.data import fetch, resolve_data_dir
from ppl_bnn.report import render_report

logger = logging.getLogger("ppl_bnn.cli")


def _csv(text: str) -> set[str]:
    return {part.strip() for part in text.split(",") if part.strip()}


def _results_dir(args: argparse.Namespace) -> Path:
    return Path(args.reports_dir) / args.suite_name


def _add_report_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--suite", default="default", help="suite name in benchmarks/ or a path to a .toml file"
    )
    parser.add_argument(
        "--reports-dir",
        default="reports",
        help="results and reports go to REPORTS_DIR/<suite name> (default: ./reports)",
    )


def _bench(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite)
    args.suite_name = suite.name
    results = _results_dir(args)
    only = {
        "dataset": _csv(args.datasets) if args.datasets else set(),
        "method": _csv(args.methods) if args.methods else set(),
        "backend": _csv(args.backends) if args.backends else set(),
    }
    jax_cache = None if args.no_jax_cache else str(Path(args.reports_dir) / ".jax-cache")
    summary = run_suite(
        suite,
        results,
        jobs=args.jobs,
        dask_address=args.dask_address,
        data_dir=str(resolve_data_dir(args.data_dir)),
        max_splits=args.splits,
        only=only,
        rerun_failed=args.rerun_failed,
        force=args.force,
        jax_cache=jax_cache,
    )
    logger.info(
        "%s: %s; %d skipped as already done; %.0f s",
        suite.name,
        ", ".join(f"{n} {s}" for s, n in sorted(summary.statuses.items())) or "no cells",
        summary.skipped,
        summary.wall_s,
    )
    if not args.no_report:
        _render(results)
    if not summary.ok:
        logger.error("cells that failed or timed out: %s", ", ".join(summary.failed_cells))
        return 1
    return 0


def _render(results: Path) -> None:
    index = render_report(results)
    logger.info("report written to %s", index)


def _report(args: argparse.Namespace) -> int:
    try:
        args.suite_name = load_suite(args.suite).name
    except SuiteError:
        args.suite_name = Path(args.suite).stem
    results = _results_dir(args)
    if not (results / "cells").is_dir():
        logger.error("no stored results in %s: run `ppl-bnn bench --suite %s` first", results,
                     args.suite)  # fmt: skip
        return 2
    _render(results)
    return 0


def _fetch(args: argparse.Namespace) -> int:
    written = fetch(args.group, args.url, args.data_dir)
    logger.info("%s: %d files downloaded; every file present and verified", args.group,
                len(written))  # fmt: skip
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``ppl-bnn``."""
    parser = argparse.ArgumentParser(prog="ppl-bnn", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    bench = sub.add_parser("bench", help="run a benchmark suite (resumable) and render its report")
    _add_report_args(bench)
    bench.add_argument("--data-dir", default=None, help="data directory (default: $PPL_BNN_DATA)")
    bench.add_argument("--jobs", type=int, default=None, help="cells at once (default: cores)")
    bench.add_argument("--dask-address", default=None, help="run cells on this Dask scheduler")
    bench.add_argument("--splits", type=int, default=None, help="only the first K splits")
    bench.add_argument("--datasets", default=None, help="comma-separated subset of datasets")
    bench.add_argument("--methods", default=None, help="comma-separated subset of methods")
    bench.add_argument("--backends", default=None, help="comma-separated subset of backends")
    bench.add_argument("--rerun-failed", action="store_true", help="rerun failed/timed-out cells")
    bench.add_argument("--force", action="store_true", help="rerun every cell")
    bench.add_argument("--no-report", action="store_true", help="do not render the report")
    bench.add_argument(
        "--no-jax-cache", action="store_true", help="disable JAX's persistent compilation cache"
    )
    bench.set_defaults(handler=_bench)

    report = sub.add_parser("report", help="re-render a suite's report from stored results")
    _add_report_args(report)
    report.set_defaults(handler=_report)

    data = sub.add_parser("data", help="data sets")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    fetch_data = data_sub.add_parser("fetch", help="download a data group and verify its checksums")
    fetch_data.add_argument("group", choices=["uci", "mnist", "fashion-mnist"])
    fetch_data.add_argument("--url", required=True, help="base URL of the group's files")
    fetch_data.add_argument("--data-dir", default=None, help="target (default: $PPL_BNN_DATA)")
    fetch_data.set_defaults(handler=_fetch)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``ppl-bnn``; returns the exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    try:
        return args.handler(args)
    except (ValueError, OSError) as err:
        logger.error("%s", err)
        return 2


if __name__ == "__main__":
    sys.exit(main())
