"""Locks that keep two processes from writing the same results: an OS-level ``flock``.

A sweep holds ``<results_dir>/.lock`` for its whole duration; a reference computation holds
``<cache root>/.<key>.lock`` while it computes that cache entry. The lock file holds who has it
(pid, host, start time, command line), for the message another process gets; the operating
system releases the lock when its holder exits, however it ends (kill -9 included), so a lock is
never left stale. The holder removes the file when it is done; a process that opened it before
checks, once it holds the lock, that the file is still the one at the path, and tries again if
not.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ppl_bnn.bench.environment import timestamp
from ppl_bnn.bench.staging import FILE_MODE

logger = logging.getLogger(__name__)

#: The lock file of a results folder.
LOCK_FILE = ".lock"


class LockedError(OSError):
    """Another process holds the lock; the message names it."""


def describe_holder(path: Path) -> str:
    """Who holds the lock at ``path``, as the holder wrote it."""
    try:
        holder: Any = json.loads(path.read_text())
    except (OSError, ValueError):
        holder = None
    if not isinstance(holder, dict):
        return "another process (it has not said which yet)"
    return (
        f"pid {holder.get('pid')} on {holder.get('host')} since {holder.get('started_at')} "
        f"({holder.get('command')})"
    )


def is_held(path: Path) -> bool:
    """Whether a process holds the lock at ``path`` now."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing it releases a lock taken here
    return False


def _acquire(path: Path, wait: bool) -> int:
    """A descriptor of ``path``, open for writing, that holds its exclusive lock."""
    while True:
        try:
            fd, writable = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE), True
        except PermissionError:  # left by another user's process: lock it to remove it
            fd, writable = os.open(path, os.O_RDONLY), False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = describe_holder(path)
                if not wait:
                    raise LockedError(
                        f"{path.parent} is in use: {path} is held by {holder}; wait for it "
                        "with --wait (wait=True)"
                    ) from None
                logger.info("waiting for %s, held by %s", path, holder)
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                current = False
            if current and writable:
                return fd
            if current:
                os.remove(path)
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # not the file at the path (any more): lock the one that is


@contextlib.contextmanager
def hold_lock(path: Path, *, wait: bool = False) -> Iterator[None]:
    """Hold the exclusive lock at ``path`` (created if need be) for the ``with`` block.

    Args:
        path: The lock file.
        wait: Wait for the holder to release it instead of raising :class:`LockedError`.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _acquire(path, wait)
    try:
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": timestamp(),
            "command": " ".join(sys.argv),
        }
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(holder).encode())
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        os.close(fd)
