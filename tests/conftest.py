"""Test entry point: process-wide runtime settings, applied before JAX or torch first run."""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any

import numpy as np
import pytest
import threadpoolctl

from ppl_bnn.backends.numpyro.compile_cache import ENV_VAR as JAX_CACHE_ENV_VAR
from tests.runtime import configure_test_runtime


def _pin_xdist_worker_to_its_cores() -> None:
    """On a pytest-xdist worker, confine this process to its share of the cores: with ``w``
    workers, worker ``i`` gets every ``w``-th core from the ``i``-th (one core each when there
    are at least as many workers as cores).

    Every thread already started is pinned, and threads and processes started later inherit it,
    so the fits, cells and probes a test starts stay on the worker's cores. They size their
    thread pools by :func:`ppl_bnn.devices.cpu_count` (the runner gives a cell ``cores //
    jobs`` threads) and XLA by the cores it may use: without pinning, each worker's subprocesses
    would take every core while the other workers run, and oversubscribed torch and XLA thread
    pools ran the conv probe's test five times slower than alone.

    The BLAS libraries started their threads (one per core) when numpy was imported, before
    this pinning, so they are capped at the worker's share too: OpenBLAS's threads spin while
    they wait, and two of them on one core made the Laplace fits of ``test_defaults`` ten times
    slower.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    index = int(worker[2:])
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", len(cores)))
    share = set(cores[index::workers]) if workers <= len(cores) else {cores[index % len(cores)]}
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task), share)
    threadpoolctl.threadpool_limits(len(share))


_pin_xdist_worker_to_its_cores()
configure_test_runtime()


def pytest_configure(config: pytest.Config) -> None:
    """Give this test process (and the processes it starts) its own JAX compilation cache.

    It is set before test modules are collected (importing the NumPyro backend switches the
    cache on), so no test writes to the user's cache, and tests that build identical programs
    (e.g. differing seeds) load them. One directory per process, not one for all xdist workers:
    JAX writes entries in place, and a worker reading an entry while another writes it would
    get JAX's "Error reading persistent compilation cache entry" warning, an error here.
    """
    cache = tempfile.TemporaryDirectory(prefix="ppl_bnn-test-jax-cache-")
    config.add_cleanup(cache.cleanup)
    os.environ[JAX_CACHE_ENV_VAR] = cache.name


#: Folders whose modules run on one xdist worker as one unit: the report tests all read the tiny
#: suite that ``tests/report/conftest.py`` fits once per worker (half a minute).
SHARED_SCOPES = ("tests/report/",)


#: Modules whose tests are units of their own, spread over the workers: long tests that share
#: no module-scoped fixture (one unit of them would be the run's tail, on one worker).
SPLIT_SCOPES = ("tests/methods/test_defaults.py",)


def _scope(nodeid: str) -> str:
    """The unit xdist's loadscope hands to one worker: a shared folder, the test itself in a
    split module, else the module."""
    module = nodeid.split("::", 1)[0]
    if module in SPLIT_SCOPES:
        return nodeid
    return next((folder for folder in SHARED_SCOPES if module.startswith(folder)), module)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown where xdist is not installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` with :func:`_scope`'s units (other modes: xdist's own)."""
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedScopeScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    return SharedScopeScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long units first, the longest first: a unit (:func:`_scope`) weighs the sum of its modules'
    ``pytest.mark.runtime(seconds)`` (a module's rough run time on 2 cores); unmarked ones
    follow in collection order.

    xdist's ``--dist loadscope`` hands units to workers in collection order (``nox -s tests``
    passes ``--no-loadscope-reorder``, which keeps it), so a long unit that came last would run
    alone while the other workers idle; started first, it overlaps the many short ones
    (longest-processing-time-first scheduling). The sort is stable: a unit's tests keep their
    order.
    """
    modules: dict[str, float] = {}
    for item in items:
        marker = item.get_closest_marker("runtime")
        modules[item.nodeid.split("::", 1)[0]] = float(marker.args[0]) if marker else 0.0
    weights: dict[str, float] = {}
    for module, seconds in modules.items():
        weights[_scope(module)] = weights.get(_scope(module), 0.0) + seconds

    def weight(item: pytest.Item) -> float:
        # A split module's tests are weighed as their module: they start with the long units.
        module = item.nodeid.split("::", 1)[0]
        return modules[module] if module in SPLIT_SCOPES else weights[_scope(item.nodeid)]

    items.sort(key=lambda item: -weight(item))


@pytest.fixture
def regression_data() -> tuple[np.ndarray, np.ndarray]:
    """A small 1-D regression set."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(24, 1))
    y = np.sin(3 * x[:, 0]) + 0.1 * rng.normal(size=24)
    return x, y


@pytest.fixture
def classification_data() -> tuple[np.ndarray, np.ndarray]:
    """A small 3-class set with 2 features."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 2))
    y = (x[:, 0] > 0).astype(int) + (x[:, 1] > 0.5).astype(int)
    return x, y


@pytest.fixture
def no_fit_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any fit that gets as far as building its target fails the test: a refusal must come
    before any work."""
    from ppl_bnn.engine.contracts import Target

    def no_work(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the target was built")

    monkeypatch.setattr(Target, "build", no_work)
