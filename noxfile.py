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
#: Seconds ``ppl-bnn bench`` gets to stop after a Ctrl-C before nox terminates it.
INTERRUPT_S = 20.0
DATA_DIR_DEFAULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shared", "data")


#: laplace-torch and what it needs, for the GGN Laplace's cross-check
#: (tests/methods/test_laplace_torch.py), installed without dependency resolution: laplace-torch
#: and backpack declare torchvision, whose only release for torch 2.13.0 on PyPI is a CUDA build
#: that cannot load beside the CPU torch (and torchmetrics imports torchvision when present, so
#: ``import laplace`` would fail); nothing the cross-check runs needs torchvision.
LAPLACE_TORCH = [
    "laplace-torch==0.3",
    "curvlinops-for-pytorch==3.0.1",
    "backpack-for-pytorch==1.7.1",
    "asdfghjkl==0.1a4",
    "torchmetrics==1.9.0",
    "lightning-utilities==0.15.3",
    "einops==0.8.2",
    "einconv==0.1.0",
    "unfoldNd==0.2.3",
    "linear_operator==0.6.1",
    "opt-einsum==3.4.0",
]


def _install(session: nox.Session, *requirements: list[str]) -> None:
    """``pip install`` each list of arguments, then byte-compile the environment on every core.

    pip compiles every file it installs, on one core: about 30 of the 50 s that installing the
    stack takes on 2 cores. Compiled afterwards by ``compileall`` on every core it takes half
    that, and later processes import from byte-code as before. A file that does not compile (some
    packages ship test files of other Python versions) is skipped silently, as pip skips it."""
    for args in requirements:
        session.install("--no-compile", *args)
    session.run(
        "python", "-c",
        "import compileall, sysconfig; "
        "compileall.compile_dir(sysconfig.get_path('purelib'), quiet=2, workers=0)",
    )  # fmt: skip


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite on every core (pass pytest arguments after ``--``), a test module's
    tests on one worker so that its module-scoped fits run once, the long modules first (in the
    order ``tests/conftest.py`` sorts them, which ``--no-loadscope-reorder`` keeps); the
    laplace-torch cross-check must run here, not skip (``PPL_BNN_REQUIRE_LAPLACE_TORCH``)."""
    _install(session, ["-e", ".[test]"], ["--no-deps", *LAPLACE_TORCH])
    env = {**_data_env(), "PPL_BNN_REQUIRE_LAPLACE_TORCH": "1"}
    session.run(
        "pytest",
        *(session.posargs or ["-q", "-n", "auto", "--dist", "loadscope", "--no-loadscope-reorder"]),
        env=env,
    )


def _data_env() -> dict[str, str]:
    return {"PPL_BNN_DATA": os.environ.get("PPL_BNN_DATA", DATA_DIR_DEFAULT)}


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Run a benchmark suite and write its report into ``reports/<suite>/`` (default: the
    offline ``default`` suite); arguments after ``--`` go to ``ppl-bnn bench``, e.g.
    ``nox -s bench -- --suite uci --data-dir ../shared/data --splits 2``."""
    _install(session, ["-e", "."])
    # A Ctrl-C reaches ppl-bnn too: give it the seconds it needs to stop its cells and exit 130
    # (nox's default is to terminate it after 0.3 s).
    session.run(
        "ppl-bnn", "bench", *session.posargs, env=_data_env(), interrupt_timeout=INTERRUPT_S
    )


@nox.session(python=PYTHON)
def report(session: nox.Session) -> None:
    """Re-render a suite's report from stored results, without refitting
    (``nox -s report -- --suite uci``)."""
    _install(session, ["-e", "."])
    session.run("ppl-bnn", "report", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and format check."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the documentation site into ``docs/_build/html``, then open it in headless Chromium
    (``tests/docs/test_site.py``). Warnings are errors: a link to a page or heading that does not
    exist, a failing tutorial (they run at every build), a docstring that does not parse. The
    browser test then follows every link from the index offline and checks that each page and
    anchor exists. Every build starts afresh (``-E``), so the tutorials always run against the
    code as it is."""
    _install(session, ["-e", ".[docs]"])
    env = {**_data_env(), "PPL_BNN_SITE": os.path.join("docs", "_build", "html")}
    session.run(
        "sphinx-build", "-E", "-W", "--keep-going", "-b", "html", "docs",
        os.path.join("docs", "_build", "html"), env=env,
    )  # fmt: skip
    session.run("pytest", "-q", "-p", "no:cacheprovider", "tests/docs", env=env)
