"""Sessions: ``tests`` (what CI runs), ``lint``.

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
    """Run the test suite (pass pytest arguments after ``--``)."""
    session.install("-e", ".[test]")
    env = {"PPL_BNN_DATA": os.environ.get("PPL_BNN_DATA", DATA_DIR_DEFAULT)}
    session.run("pytest", *(session.posargs or ["-q"]), env=env)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and format check."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
