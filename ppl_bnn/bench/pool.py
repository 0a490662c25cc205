"""Warm worker processes: each runs many cells, one at a time, with torch and JAX imported once.

A new Python process per cell spends seconds importing torch and JAX before it fits anything,
and compiles again every program an earlier cell had compiled. A :class:`WarmWorker` is a
process that runs cells sent to it until it is told to stop; the programs JAX and torch cache
in memory stay warm between them. Workers are forked from a fork server (``multiprocessing``'s
``forkserver``) that has imported torch, JAX and the rest once (:mod:`ppl_bnn.bench.forkserver`),
so a new worker, the first or one that replaces a crashed one, starts in a fraction of a second.

Isolation is kept. A cell that overruns its timeout has its worker's whole process group
killed; a worker that dies during a cell (``os._exit``, a segfault, the out-of-memory killer) is
noticed when its reply pipe closes. Either way that worker is gone, the cell is recorded as
``timeout`` or ``failed`` (``WorkerCrashed``, with its exit status and the tail of its stderr),
and the next cell gets a new worker; no other cell is touched. A worker is also retired after
:data:`MAX_TASKS` cells, or once its resident memory passes :data:`MEMORY_CEILING` of the
machine's, so that what a long sweep leaks never accumulates.

What must be fixed before JAX or torch start is the worker's :class:`Profile`: its thread budget
(XLA's and the BLAS libraries' threads, set in its environment) and its number of XLA host
devices (NumPyro's parallel chains). A cell runs on an idle worker of its profile, else on a new
one. Idle workers are kept in this process (:func:`acquire`, :func:`release`), so every sweep
that this process runs, and every Dask task on one Dask worker, reuses them; they exit with it.

A Ctrl-C ends a sweep at once: :func:`interrupt` kills every worker of this process, busy or
idle; a task whose worker was killed so raises :class:`Interrupted` (not a lost cell: it leaves
no record, and a resumed sweep runs it again), and no new worker starts until
:func:`allow_work` (the start of the next sweep).

The protocol: one JSON line per task on the worker's task pipe, one JSON line back per task on
a reply pipe (so nothing a library prints can mix with it), written after the cell's record.
Before it, a task may send progress lines (``{"log": text, "logger": name, "level": n}``: a
reference's batches, which take minutes); this process logs each under the worker's logger name
and passes its text to the listeners of :func:`relayed_to` (a sweep's progress bar).
The worker's stdout goes nowhere and its stderr to a file, whose part written during a cell
goes into the record of a cell that killed its worker.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import logging
import multiprocessing
import os
import select
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from multiprocessing import forkserver, reduction
from pathlib import Path
from typing import Any

from ppl_bnn.bench.environment import thread_environment
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.timing import now

logger = logging.getLogger(__name__)

#: The module whose ``main`` a worker runs: replaced by tests that inject faults.
WORKER_MODULE = "ppl_bnn.bench.worker"
#: A worker process's name: the fork server prepares processes of this name without the main
#: module of the process that started them (:mod:`ppl_bnn.bench.forkserver`).
WORKER_NAME = "ppl_bnn-worker"
#: Starts workers: a process that has imported torch, JAX and the rest once
#: (:mod:`ppl_bnn.bench.forkserver`) and forks each new worker from itself.
_FORK_SERVER = multiprocessing.get_context("forkserver")
_FORK_SERVER.set_forkserver_preload(["ppl_bnn.bench.forkserver"])
#: Cells a worker runs before it is retired.
MAX_TASKS = 40
#: Share of the machine's memory a worker may hold (resident) before it is retired.
MEMORY_CEILING = 0.25
#: Idle workers kept per core (workers of several profiles may be idle at once).
MAX_IDLE_PER_CORE = 2
#: Seconds a new worker may take to import its libraries and say it is ready.
START_TIMEOUT_S = 300.0
#: Characters of a dead worker's stderr kept in the record.
STDERR_TAIL = 4000
#: Environment variable through which the fork server learns which backends to import
#: (:func:`preload_backends`, :func:`ppl_bnn.bench.worker.preload`): comma-separated names. Set
#: by the user (or the tests), it overrides :func:`preload_backends`.
PRELOAD_VAR = "PPL_BNN_PRELOAD_BACKENDS"
#: The backends the fork server imports when it starts (None: every backend).
_preload: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Profile:
    """What a worker fixes when it starts.

    Attributes:
        threads: Threads for XLA, BLAS and torch.
        host_devices: XLA CPU devices, or None for a cell that does not care (Pyro's): it runs
            on an idle worker of any device count.
        xla_optimisation: How hard XLA optimises the worker's programs
            (:data:`ppl_bnn.engine.xla.XLA_OPTIMISATION`), or None: as the runner's process has
            it. A cell runs only on a worker of its own.
    """

    threads: int
    host_devices: int | None = None
    xla_optimisation: str | None = None

    def admits(self, worker: Profile) -> bool:
        """Whether a cell with this profile may run on a worker started with ``worker``."""
        return (
            self.threads == worker.threads
            and self.host_devices in (None, worker.host_devices)
            and self.xla_optimisation == worker.xla_optimisation
        )


class WorkerLost(RuntimeError):
    """The worker died or was killed during a task.

    Attributes:
        timed_out: It was killed because the task overran its timeout.
        returncode: Its exit status (negative: the signal that ended it).
        stderr: What it wrote to stderr during the task (the tail).
    """

    def __init__(self, message: str, *, timed_out: bool, returncode: int | None, stderr: str):
        super().__init__(message)
        self.timed_out = timed_out
        self.returncode = returncode
        self.stderr = stderr


class Interrupted(Exception):
    """The task's worker was ended by :func:`interrupt` (a Ctrl-C), not by the task."""


_fork_server_lock = threading.Lock()


def preload_backends(names: tuple[str, ...] | None) -> None:
    """The backends whose libraries the fork server imports when it starts (None: every one):
    a sweep of NumPyro cells only spares its first worker seconds of importing torch and Pyro.
    Once the fork server runs, this changes nothing: a worker imports a backend it lacks when
    its first cell needs it."""
    global _preload
    _preload = None if names is None else tuple(sorted(set(names)))


def named_backends() -> tuple[str, ...]:
    """The backends ``$PPL_BNN_PRELOAD_BACKENDS`` names (every backend where it is unset).

    Raises:
        ValueError: It names no backend or an unknown one (checked before the fork server
            would fail to import it).
    """
    named = os.environ.get(PRELOAD_VAR)
    known = backend_names()
    if named is None:
        return known
    unknown = [name for name in named.split(",") if name not in known]
    if unknown:
        raise ValueError(
            f"${PRELOAD_VAR}={named!r} names {', '.join(map(repr, unknown))}, not a backend: "
            f"give comma-separated names of {', '.join(known)}, or unset it to import every one"
        )
    return tuple(named.split(","))


def _preload_environment() -> dict[str, str]:
    """``$PPL_BNN_PRELOAD_BACKENDS`` naming :func:`preload_backends`'s backends, for the fork
    server and each worker (whose ``preload`` reads it: without it, a worker of NumPyro cells
    would import torch and Pyro too, seconds of its start), unless the variable is set."""
    if _preload is None or PRELOAD_VAR in os.environ:
        return {}
    return {PRELOAD_VAR: ",".join(_preload)}


def _start_fork_server() -> None:
    """Start the fork server if it is not running, with the BLAS libraries' threads at one:
    they start their thread pools when they are loaded, and a forked worker inherits none of
    those threads (each worker sets its own budget), and the backends of
    :func:`preload_backends`. Called under ``_fork_server_lock``."""
    named_backends()  # refused here, by name, rather than in the fork server's imports
    saved = dict(os.environ)
    os.environ.update({**thread_environment(1), **_preload_environment()})
    try:
        forkserver.ensure_running()
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _children_allowed() -> Iterator[None]:
    """Let a daemonic process start a worker: ``multiprocessing`` refuses children to one, and
    a Dask worker is one, as is a worker that runs a probe's sweeps. The pool ends its workers
    itself, and each ends when the process that started it does
    (:func:`ppl_bnn.bench.worker.main`). Called under ``_fork_server_lock``."""
    current = multiprocessing.current_process()
    daemonic = current.daemon
    current.daemon = False
    try:
        yield
    finally:
        current.daemon = daemonic


class _Descriptor:
    """A file descriptor of this process, given to a worker as an argument: the fork server
    passes the worker its own copy."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        # Pickled while the worker starts, when DupFd hands the descriptor to the fork server.
        return _inherited, (reduction.DupFd(self.fd),)


def _inherited(duplicate: Any) -> int:
    return duplicate.detach()


def _worker_main(module: str, *args: Any) -> None:
    """A worker, forked by the fork server: ``module``'s ``main`` (:func:`ppl_bnn.bench.worker.main`
    with the arguments it lists), named as ``python -m`` names a program."""
    importlib.import_module(module).main(*args)


class WarmWorker:
    """One worker process; see the module docstring. Not thread-safe: one task at a time."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.tasks = 0
        self.thread = threading.get_ident()  # the thread that last used it
        # Open for the worker's life, closed by kill() or stop().
        self._stderr = tempfile.TemporaryFile(prefix="ppl_bnn-worker-", suffix=".stderr")  # noqa: SIM115
        tasks_read, tasks_write = os.pipe()
        replies_read, replies_write = os.pipe()
        started = now()
        try:
            self.process = self._start(profile, tasks_read, replies_write)
        except BaseException:  # nothing of a worker that did not start is left open
            os.close(tasks_write)
            os.close(replies_read)
            self._stderr.close()
            raise
        finally:
            os.close(tasks_read)
            os.close(replies_write)
        self._tasks = os.fdopen(tasks_write, "wb")
        self._replies = replies_read
        self._buffer = b""
        ready = self._started()
        self.pid = int(ready["pid"])
        self.start_seconds = now() - started
        logger.debug("worker %d started in %.1f s (%s)", self.pid, self.start_seconds, profile)

    def _start(self, profile: Profile, tasks_read: int, replies_write: int) -> Any:
        """The worker's process, forked by the fork server (started first if it is not)."""
        with _fork_server_lock:
            _start_fork_server()
            environment = {
                **os.environ,
                **thread_environment(profile.threads),
                **_preload_environment(),
            }
        process = _FORK_SERVER.Process(
            target=_worker_main,
            name=WORKER_NAME,
            daemon=True,  # ended with this process where the pool has not stopped it
            args=(
                WORKER_MODULE,
                _Descriptor(tasks_read),
                _Descriptor(replies_write),
                _Descriptor(self._stderr.fileno()),
                environment,
                profile.threads,
                profile.host_devices or 1,
                os.getpid(),
                profile.xla_optimisation,
            ),
        )
        with _fork_server_lock, _children_allowed():
            process.start()
        return process

    def _started(self) -> dict[str, Any]:
        """The worker's ready message. It starts in the open: a Ctrl-C while it imports torch
        and JAX ends it at once (:class:`Interrupted`), and a worker that cannot start is lost
        as a crash, not as its first cell's timeout."""
        with _idle.lock:
            _idle.starting.add(self)
        try:
            if _interrupted.is_set():  # interrupted before it was listed as starting
                self.end()
            return self._reply(START_TIMEOUT_S, "starting", cell_timeout=False)
        except WorkerLost as lost:
            if _interrupted.is_set():
                raise Interrupted("the sweep was interrupted") from lost
            raise
        finally:
            with _idle.lock:
                _idle.starting.discard(self)

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

    def run(self, task: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send ``task`` and return the worker's reply.

        Raises:
            WorkerLost: The task overran ``timeout_s`` (the worker is killed) or the worker died.
        """
        self.tasks += 1
        try:
            self._tasks.write((json.dumps(task) + "\n").encode())
            self._tasks.flush()
        except BrokenPipeError:
            pass  # it died between tasks: the reply pipe says so below
        try:
            return self._reply(timeout_s, "running a cell")
        except WorkerLost as lost:
            if _interrupted.is_set():
                raise Interrupted("the sweep was interrupted") from lost
            raise

    def _reply(self, timeout_s: float, doing: str, cell_timeout: bool = True) -> dict[str, Any]:
        offset = self._stderr.seek(0, os.SEEK_END)
        deadline = now() + timeout_s
        while True:
            while b"\n" not in self._buffer:
                left = deadline - now()
                if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                    what = f"overran its {timeout_s:g} s limit {doing}"
                    raise self._lost(what, offset, timed_out=cell_timeout, died=False)
                chunk = os.read(self._replies, 65536)
                if not chunk:
                    self.process.join(timeout=10)
                    raise self._lost(f"died {doing}", offset, timed_out=False, died=True)
                self._buffer += chunk
            line, _, self._buffer = self._buffer.partition(b"\n")
            message = json.loads(line)
            if "log" not in message:
                return message
            _relay(message)

    def _lost(self, what: str, offset: int, *, timed_out: bool, died: bool) -> WorkerLost:
        """Kill the worker (if it still runs) and describe how it was lost (``died``: by itself,
        with an exit status worth naming)."""
        self.end()
        self._stderr.seek(offset)
        stderr = self._stderr.read().decode(errors="replace")[-STDERR_TAIL:]
        self._close()
        code = self.process.exitcode
        status = f" with status {code}{_signal_name(code)}" if died else ""
        return WorkerLost(
            f"the worker process {what}{status}",
            timed_out=timed_out,
            returncode=code,
            stderr=stderr,
        )

    def resident_bytes(self) -> int:
        """The worker's resident memory (0 where it cannot be read)."""
        try:
            pages = int(Path(f"/proc/{self.process.pid}/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            return 0
        return pages * os.sysconf("SC_PAGE_SIZE")

    def kill(self) -> None:
        """End the worker and everything it started, now."""
        self.end()
        self._close()

    def end(self) -> None:
        """Kill the worker and everything it started (the thread running its task notices its
        reply pipe close). The worker itself too: one killed while it starts may not yet lead
        a process group of its own."""
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(self.process.pid, signal.SIGKILL)
        self.process.join()

    def stop(self) -> None:
        """Let the worker finish (it exits when its task pipe closes); kill it if it does not."""
        with contextlib.suppress(OSError):
            self._tasks.close()
        self.process.join(timeout=10)
        if self.process.exitcode is None:
            self.kill()
        self._close()

    def _close(self) -> None:
        if not self._stderr.closed:
            with contextlib.suppress(OSError):
                os.close(self._replies)
            with contextlib.suppress(OSError):
                self._tasks.close()
            self._stderr.close()


#: Called with the text of every progress line a worker relays (:func:`relayed_to`).
_listeners: list[Callable[[str], None]] = []


@contextlib.contextmanager
def relayed_to(listener: Callable[[str], None]) -> Iterator[None]:
    """Pass the text of every progress line a worker relays during the block to ``listener``
    (from the thread that waits on that worker)."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def _relay(message: dict[str, Any]) -> None:
    """A worker's progress line: logged here as the worker logged it, and shown to listeners."""
    logging.getLogger(message["logger"]).log(message["level"], "%s", message["log"])
    for listener in list(_listeners):
        listener(message["log"])


def _signal_name(code: int | None) -> str:
    if code is None or code >= 0:
        return ""
    with contextlib.suppress(ValueError):
        return f" ({signal.Signals(-code).name})"
    return ""


def _memory_ceiling() -> float:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):  # pragma: no cover - non-POSIX
        return float("inf")
    return MEMORY_CEILING * total


class _Idle:
    """This process's idle workers, those running a task (``busy``) and those starting."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.workers: list[WarmWorker] = []
        self.busy: set[WarmWorker] = set()
        self.starting: set[WarmWorker] = set()


_idle = _Idle()
#: Set by :func:`interrupt`, cleared by :func:`allow_work`.
_interrupted = threading.Event()


def interrupt() -> None:
    """End every worker of this process now, busy, idle or starting (a Ctrl-C): their tasks
    raise :class:`Interrupted`, and no worker starts until :func:`allow_work`."""
    _interrupted.set()
    with _idle.lock:
        busy, idle = [*_idle.busy, *_idle.starting], _idle.workers
        _idle.workers = []
    for worker in busy:
        # Only the signal: the thread waiting on its reply pipe sees it close and cleans up.
        worker.end()
    for worker in idle:
        worker.kill()


def allow_work() -> None:
    """Let workers start again after :func:`interrupt` (a new sweep)."""
    _interrupted.clear()


def _check_not_interrupted() -> None:
    if _interrupted.is_set():
        raise Interrupted("the sweep was interrupted")


def acquire(profile: Profile) -> WarmWorker:
    """An idle worker that admits ``profile``, else a new one (its start counted in
    :attr:`WarmWorker.start_seconds`, 0 for a reused one). Among idle workers, the one this
    thread used last comes first, then one of exactly this profile: a thread that runs the
    seeds of one program one after another runs them in one worker, where the first seed's
    compiled programs are still in memory, and a cell that runs anywhere does not take the
    worker another profile's cells are waiting for."""
    _check_not_interrupted()
    thread = threading.get_ident()
    exact = profile.host_devices or 1
    with _idle.lock:
        for worker in [w for w in _idle.workers if not w.alive]:
            _idle.workers.remove(worker)
            worker.kill()
        admitted = [w for w in _idle.workers if profile.admits(w.profile)]
        if admitted:
            worker = min(admitted, key=lambda w: (w.thread != thread,
                                                  w.profile.host_devices != exact))  # fmt: skip
            _idle.workers.remove(worker)
            worker.thread, worker.start_seconds = thread, 0.0
            return worker
    if profile.host_devices is None:
        profile = replace(profile, host_devices=1)
    return WarmWorker(profile)


def release(worker: WarmWorker) -> None:
    """Keep ``worker`` for the next cell, or retire it: dead, :data:`MAX_TASKS` cells run or
    over the memory ceiling. Past :data:`MAX_IDLE_PER_CORE` idle workers per core, the one idle
    longest is retired."""
    if not worker.alive or worker.tasks >= MAX_TASKS or worker.resident_bytes() > _memory_ceiling():
        worker.stop()
        return
    with _idle.lock:
        _idle.workers.append(worker)
        cap = MAX_IDLE_PER_CORE * (os.cpu_count() or 1)
        retired, _idle.workers = _idle.workers[:-cap], _idle.workers[-cap:]
    for old in retired:
        old.stop()


@contextlib.contextmanager
def borrowed(profile: Profile, *, new: bool = False) -> Iterator[WarmWorker]:
    """A worker for the ``with`` block: one of this process's pool, given back afterwards (a
    killed one is not kept), or, with ``new``, one started for the block alone and stopped
    after it."""
    _check_not_interrupted()
    worker = WarmWorker(profile) if new else acquire(profile)
    with _idle.lock:
        _idle.busy.add(worker)
    try:
        if _interrupted.is_set():  # interrupted while it started: it was not yet busy
            worker.kill()
            raise Interrupted("the sweep was interrupted")
        yield worker
    finally:
        with _idle.lock:
            _idle.busy.discard(worker)
        if new or _interrupted.is_set():
            worker.stop()
        else:
            release(worker)


@atexit.register
def shutdown() -> None:
    """Stop every idle worker of this process."""
    with _idle.lock:
        workers, _idle.workers = _idle.workers, []
    for worker in workers:
        worker.stop()
