"""Sessions: ``tests`` (what CI runs), ``bench`` (the benchmark suite and its report), ``report``
(re-render a report from stored results), ``lint``.

pip (not uv) installs the stack: torch's CPU wheel is pinned in ``pyproject.toml`` and comes from
pip's configured find-links on these machines.
"""

from __future__ import annotations

import os

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests", "lint"]

PYTHON = "3.11"
DATA_DIR_DEFAULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shared", "data")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite on every core (pass pytest arguments after ``--``)."""
    session.install("-e", ".[test]")
    session.run("pytest", *(session.posargs or ["-q", "-n", "auto"]), env=_data_env())


def _data_env() -> dict[str, str]:
    return {"PPL_BNN_DATA": os.environ.get("PPL_BNN_DATA", DATA_DIR_DEFAULT)}


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Run a benchmark suite and write its report into ``reports/<suite>/`` (default: the
    offline ``default`` suite); arguments after ``--`` go to ``ppl-bnn bench``, e.g.
    ``nox -s bench -- --suite uci --data-dir ../shared/data --splits 2``."""
    session.install("-e", ".")
    session.run("ppl-bnn", "bench", *session.posargs, env=_data_env())


@nox.session(python=PYTHON)
def report(session: nox.Session) -> None:
    """Re-render a suite's report from stored results, without refitting
    (``nox -s report -- --suite uci``)."""
    session.install("-e", ".")
    session.run("ppl-bnn", "report", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and format check."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
