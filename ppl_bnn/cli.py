"""The ``ppl-bnn`` command: run benchmark suites, precompute reference posteriors, render
reports, fetch data.

::

    ppl-bnn bench [--suite default] [--jobs N | --dask-address tcp://...] [--splits K]
                  [--no-reference] [--reference-dir DIR] [--wait] [--device cpu|cuda|auto]
    ppl-bnn reference [--suite default] [--datasets a,b] [--splits K] [--reference-dir DIR]
    ppl-bnn report [--suite default]
    ppl-bnn compare DATA --target COL [--methods a,b] [--backends numpyro,pyro] [--hidden 50]
                    [--seeds 3] [--test-fraction 0.1 [--splits K] | --test DATA2] [--out DIR]
                    [--device cpu|cuda|auto]
    ppl-bnn data fetch uci --url URL [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import ast
import importlib
import logging
import sys

from ppl_bnn.defaults import DEFAULT_METHODS, MAX_ATTEMPTS
from ppl_bnn.devices import DEVICES
from ppl_bnn.engine.registry import DEFAULT_BACKEND

logger = logging.getLogger("ppl_bnn.cli")


def show(text: object) -> None:
    """The command's answer on stdout (its log lines go to stderr)."""
    print(text)


def option_pair(text: str) -> tuple[str, str, object]:
    """``--option METHOD.NAME=VALUE``: the value a Python literal (``500``, ``0.01``, ``True``)
    or, failing that, the word itself."""
    key, _, value = text.partition("=")
    method, _, name = key.partition(".")
    if not (method and name and value):
        raise argparse.ArgumentTypeError(f"expected METHOD.NAME=VALUE, got {text!r}")
    try:
        return method, name, ast.literal_eval(value)
    except (ValueError, SyntaxError):  # a bare word: the string itself
        return method, name, value


def method_options(pairs: list[tuple[str, str, object]]) -> dict[str, dict[str, object]]:
    """Method -> options of the ``--option`` pairs."""
    out: dict[str, dict[str, object]] = {}
    for method, name, value in pairs:
        out.setdefault(method, {})[name] = value
    return out


def _jobs(text: str) -> int:
    """``--jobs``: a positive integer (left out, one per core; 0 is no shorthand for that)."""
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(
            f"must be a positive integer (leave it out for one per core), got {text!r}"
        )
    return jobs


def _add_report_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--suite", default="default", help="suite name in benchmarks/ or a path to a .toml file"
    )
    parser.add_argument(
        "--reports-dir",
        default="reports",
        help="results and reports go to REPORTS_DIR/<suite name> (default: ./reports)",
    )


def _noise(text: str) -> float | str:
    """``--noise``: ``learned`` or a known std (a positive number)."""
    if text == "learned":
        return text
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be 'learned' or a positive number, got {text!r}")
    return value


def _widths(text: str) -> tuple[int, ...]:
    """``--hidden``: comma-separated positive layer widths (``50`` or ``50,50``)."""
    try:
        widths = tuple(int(part) for part in text.split(","))
    except ValueError:
        widths = ()
    if not widths or min(widths) < 1:
        raise argparse.ArgumentTypeError(
            f"must be positive layer widths separated by commas (50 or 50,50), got {text!r}"
        )
    return widths


def _add_compare_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data", help="the data: a CSV, TSV, Parquet or NPZ (x, y) file")
    parser.add_argument("--target", default=None, help="the target column (not for NPZ)")
    parser.add_argument("--features", default=None, help="comma-separated feature columns "
                        "(default: every other column)")  # fmt: skip
    parser.add_argument("--task", choices=["regression", "classification"], default=None,
                        help="default: classification for string or integer targets")  # fmt: skip
    held = parser.add_mutually_exclusive_group()
    held.add_argument("--test-fraction", type=float, default=None,
                      help="held-out share of the rows in each split (default 0.1)")  # fmt: skip
    held.add_argument("--test", default=None, help="a test file with the same columns")
    parser.add_argument("--splits", type=int, default=1, help="random splits (default 1)")
    parser.add_argument("--methods", default=None, help="comma-separated methods (default: "
                        f"{','.join(DEFAULT_METHODS)})")  # fmt: skip
    parser.add_argument(
        "--backends", default=DEFAULT_BACKEND, help=f"comma-separated (default {DEFAULT_BACKEND})"
    )
    parser.add_argument("--option", type=option_pair, action="append", default=[],
                        metavar="METHOD.NAME=VALUE",
                        help="a method's option, e.g. svi.num_steps=5000 (repeatable)")  # fmt: skip
    parser.add_argument("--hidden", type=_widths, default=(50,), help="hidden layer widths, "
                        "e.g. 50 or 50,50 (default 50)")  # fmt: skip
    parser.add_argument("--activation", default="tanh", help="hidden activation (default tanh)")
    parser.add_argument("--noise", type=_noise, default="learned",
                        help="regression noise: learned (default) or a known std in "
                        "standardised units")  # fmt: skip
    parser.add_argument("--seeds", type=int, default=3, help="seeds per method (default 3)")
    parser.add_argument("--reference", choices=["auto", "yes", "no"], default="auto",
                        help="a reference posterior, a chain ensemble (auto: where the network "
                        "is small enough)")  # fmt: skip
    parser.add_argument("--tune", choices=["auto", "no"], default="auto",
                        help="auto: tune MC dropout's rate on a validation split")  # fmt: skip
    parser.add_argument("--jobs", type=_jobs, default=None, help="cells at once (default: cores)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per cell")
    parser.add_argument("--out", default=None, help="results and report folder (default: "
                        "reports/compare-<file name>-<hash of the model and data>)")  # fmt: skip
    parser.add_argument("--reference-dir", default=None, help="reference posterior cache")
    parser.add_argument("--predict", default=None, metavar="FILE", help="rows to predict at "
                        "with the recommended fit (the same feature columns; a target is "
                        "not needed)")  # fmt: skip
    parser.add_argument("--predictions", default=None, metavar="CSV",
                        help="where --predict writes (default: predictions-<FILE name>.csv in "
                        "the results folder)")  # fmt: skip
    _add_retry_args(parser)
    _add_device_arg(parser)


def _add_device_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default=None,
        help="where the fits run: cpu, cuda, or auto (cuda where torch and JAX both have it); "
        "default: $PPL_BNN_DEVICE, else cpu",
    )


def _add_retry_args(parser: argparse.ArgumentParser) -> None:
    """``--no-retry`` and ``--rerun-failed``: what a run does with earlier failures."""
    parser.add_argument(
        "--no-retry",
        action="store_true",
        help="keep cells and references that failed or timed out in an earlier run (default: "
        f"run them again, until each has had {MAX_ATTEMPTS} runs)",
    )
    parser.add_argument(
        "--rerun-failed",
        action="store_true",
        help="run failed or timed-out cells and references again, however many runs they had",
    )


def _add_run_args(parser: argparse.ArgumentParser, jobs_help: str) -> None:
    """What ``bench`` and ``reference`` share: data, selection, jobs, the device and the
    reference cache."""
    _add_device_arg(parser)
    parser.add_argument("--data-dir", default=None, help="data directory (default: $PPL_BNN_DATA)")
    parser.add_argument("--jobs", type=_jobs, default=None, help=jobs_help)
    parser.add_argument("--splits", type=int, default=None, help="only the first K splits")
    parser.add_argument(
        "--datasets",
        default=None,
        help="comma-separated subset of datasets (mnist, or one variant of it: mnist/lenet5)",
    )
    _add_retry_args(parser)
    parser.add_argument(
        "--reference-dir",
        default=None,
        help="reference posterior cache (default: $PPL_BNN_REFERENCE_DIR, else "
        "$XDG_CACHE_HOME/ppl_bnn/references or ~/.cache/ppl_bnn/references)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``ppl-bnn``."""
    parser = argparse.ArgumentParser(prog="ppl-bnn", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    bench = sub.add_parser("bench", help="run a benchmark suite (resumable) and render its report")
    _add_report_args(bench)
    _add_run_args(bench, "cells at once (default: cores)")
    bench.add_argument("--dask-address", default=None, help="run cells on this Dask scheduler")
    bench.add_argument("--methods", default=None, help="comma-separated subset of methods")
    bench.add_argument("--backends", default=None, help="comma-separated subset of backends")
    bench.add_argument(
        "--force",
        action="store_true",
        help="rerun every cell (a rerun that fails keeps the earlier result)",
    )
    bench.add_argument(
        "--wait",
        action="store_true",
        help="wait for another sweep on the same results folder to end (default: exit 2)",
    )
    bench.add_argument("--no-report", action="store_true", help="do not render the report")
    bench.add_argument(
        "--no-jax-cache", action="store_true", help="disable JAX's persistent compilation cache"
    )
    bench.add_argument(
        "--no-reference", action="store_true", help="skip the suite's reference posteriors"
    )
    bench.set_defaults(handler="bench")

    reference = sub.add_parser(
        "reference", help="compute a suite's reference posteriors into their cache (no cells)"
    )
    reference.add_argument(
        "--suite", default="default", help="suite name in benchmarks/ or a path to a .toml file"
    )
    _add_run_args(reference, "references at once (default: cores)")
    reference.set_defaults(handler="reference")

    report = sub.add_parser("report", help="re-render a suite's report from stored results")
    _add_report_args(report)
    report.set_defaults(handler="report")

    comparing = sub.add_parser(
        "compare", help="compare the methods on a data file of your own: report and verdict"
    )
    _add_compare_args(comparing)
    comparing.set_defaults(handler="compare_file")

    data = sub.add_parser("data", help="data sets")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    fetch_data = data_sub.add_parser("fetch", help="download a data group and verify its checksums")
    fetch_data.add_argument("group", choices=["uci", "mnist", "fashion-mnist"])
    fetch_data.add_argument("--url", required=True, help="base URL of the group's files")
    fetch_data.add_argument("--data-dir", default=None, help="target (default: $PPL_BNN_DATA)")
    fetch_data.set_defaults(handler="fetch_data")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``ppl-bnn``; returns the exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    if not args.verbose:  # JAX's search for accelerators it does not find is not news
        logging.getLogger("jax").setLevel(logging.WARNING)
    try:
        # The numerical stack, only now that the arguments are known to be good.
        from ppl_bnn.methods.memory import InsufficientMemoryError
        from ppl_bnn.runtime import configure_runtime

        if getattr(args, "device", None) is not None:  # before anything starts JAX or torch
            configure_runtime(device=args.device)
        return getattr(importlib.import_module("ppl_bnn.commands"), args.handler)(args)
    except (ValueError, OSError, InsufficientMemoryError) as err:
        logger.error("%s", err)
        return 2
    except KeyboardInterrupt:
        # What finished is on disk; what was running left nothing behind.
        logger.warning("interrupted: finished results are kept; run the same command to resume")
        return 130


if __name__ == "__main__":
    sys.exit(main())
