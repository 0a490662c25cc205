"""Where a benchmark runs: machine, library versions, git commit, date, and the environment
variables that set a cell's thread budget."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ppl_bnn.devices import cpu_count
from ppl_bnn.versions import library_versions


def timestamp() -> str:
    """Now, in UTC, to the second (ISO 8601)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def thread_environment(threads: int) -> dict[str, str]:
    """Environment variables that cap XLA's and the BLAS libraries' threads at ``threads``."""
    flags = os.environ.get("XLA_FLAGS", "")
    if threads == 1:
        flags = f"{flags} --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    env = {"XLA_FLAGS": flags.strip()}
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    return env


def machine_info() -> dict[str, Any]:
    """Host, CPU model, usable cores, platform."""
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "processor": _cpu_model(),
        "cores": cpu_count(),
        "python": platform.python_version(),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_commit(path: Path) -> str:
    """The commit checked out at ``path`` (with ``+dirty`` if it has changes), or ``unknown``."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{commit}+dirty" if dirty else commit


def environment() -> dict[str, Any]:
    """The environment block of a suite's results."""
    return {
        "git_commit": git_commit(Path(__file__).resolve().parents[2]),
        "date": timestamp(),
        "machine": machine_info(),
        "versions": library_versions(),
    }
