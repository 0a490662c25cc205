"""Warm worker processes: each imports torch and JAX once and then runs many cells, one at a time.

A new Python process per cell spends seconds importing torch and JAX before it fits anything,
and compiles again every program an earlier cell had compiled. A :class:`WarmWorker` is a child
process (``python -m ppl_bnn.bench.worker --serve``) that imports both once and runs cells sent
to it until it is told to stop; the programs JAX and torch cache in memory stay warm between
them.

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

The protocol: one JSON line per task on the worker's stdin, one JSON line back per task on a
pipe of its own (so nothing a library prints can mix with it), written after the cell's record.
The worker's stdout goes nowhere and its stderr to a file, whose part written during a cell
goes into the record of a cell that killed its worker.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppl_bnn.bench.environment import thread_environment
from ppl_bnn.timing import now

logger = logging.getLogger(__name__)

#: The module a worker runs (``python -m``): replaced by tests that inject faults.
WORKER_MODULE = "ppl_bnn.bench.worker"
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


@dataclass(frozen=True)
class Profile:
    """What a worker fixes when it starts.

    Attributes:
        threads: Threads for XLA, BLAS and torch.
        host_devices: XLA CPU devices, or None for a cell that does not care (Pyro's): it runs
            on an idle worker of any device count.
    """

    threads: int
    host_devices: int | None = None

    def admits(self, worker: Profile) -> bool:
        """Whether a cell with this profile may run on a worker started with ``worker``."""
        return self.threads == worker.threads and self.host_devices in (
            None,
            worker.host_devices,
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


class WarmWorker:
    """One worker process; see the module docstring. Not thread-safe: one task at a time."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.tasks = 0
        self.thread = threading.get_ident()  # the thread that last used it
        # Open for the worker's life, closed by kill() or stop().
        self._stderr = tempfile.TemporaryFile(prefix="ppl_bnn-worker-", suffix=".stderr")  # noqa: SIM115
        read_fd, write_fd = os.pipe()
        devices = profile.host_devices or 1
        command = [sys.executable, "-m", WORKER_MODULE, "--serve", str(write_fd)]
        command += ["--threads", str(profile.threads), "--host-devices", str(devices)]
        command += ["--parent-pid", str(os.getpid())]
        started = now()
        try:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                pass_fds=(write_fd,),
                env={**os.environ, **thread_environment(profile.threads)},
                start_new_session=True,  # a timeout kills the worker and anything it started
            )
        finally:
            os.close(write_fd)
        self._replies = read_fd
        self._buffer = b""
        ready = self._started()
        self.pid = int(ready["pid"])
        self.start_seconds = now() - started
        logger.debug("worker %d started in %.1f s (%s)", self.pid, self.start_seconds, profile)

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
        return self.proc.poll() is None

    def run(self, task: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send ``task`` and return the worker's reply.

        Raises:
            WorkerLost: The task overran ``timeout_s`` (the worker is killed) or the worker died.
        """
        self.tasks += 1
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(task) + "\n").encode())
            self.proc.stdin.flush()
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
        while b"\n" not in self._buffer:
            left = deadline - now()
            if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                what = f"overran its {timeout_s:g} s limit {doing}"
                raise self._lost(what, offset, timed_out=cell_timeout, died=False)
            chunk = os.read(self._replies, 65536)
            if not chunk:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=10)
                raise self._lost(f"died {doing}", offset, timed_out=False, died=True)
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def _lost(self, what: str, offset: int, *, timed_out: bool, died: bool) -> WorkerLost:
        """Kill the worker (if it still runs) and describe how it was lost (``died``: by itself,
        with an exit status worth naming)."""
        self.end()
        self._stderr.seek(offset)
        stderr = self._stderr.read().decode(errors="replace")[-STDERR_TAIL:]
        self._close()
        code = self.proc.returncode
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
            pages = int(Path(f"/proc/{self.proc.pid}/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            return 0
        return pages * os.sysconf("SC_PAGE_SIZE")

    def kill(self) -> None:
        """End the worker and everything it started, now."""
        self.end()
        self._close()

    def end(self) -> None:
        """Kill the worker and everything it started (the thread running its task notices its
        reply pipe close)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        """Let the worker finish (it exits when its stdin closes); kill it if it does not."""
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        self._close()

    def _close(self) -> None:
        if not self._stderr.closed:
            with contextlib.suppress(OSError):
                os.close(self._replies)
            if self.proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self.proc.stdin.close()
            self._stderr.close()


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
        profile = Profile(profile.threads, 1)
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
