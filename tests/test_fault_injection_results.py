"""Fault injection for saved fits: ``kill -9`` during ``FitResult.save`` over an earlier save, and
damaged files of every kind a save writes.

The kills run in a helper process started once with the package and ArviZ imported: for each
save it forks a child that saves one of two fits (of different methods) over a folder, and the
child is killed with SIGKILL at a random moment (seeded: up to a little more than one save) or,
to reach every short window between two steps, at its k-th file-system operation, for every k.
After every kill the folder must load as the complete earlier fit or the complete new one, never
a mix, or, where no save has completed there yet, raise ``FileNotFoundError``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ppl_bnn import BNN, FitResult, fit
from ppl_bnn.files import clean_staging
from ppl_bnn.results import ResultFileError

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 12
FRESH_EVERY = 6  # every sixth round saves into a folder where nothing was saved yet
#: Audit events of the file-system operations a save may make (see ``sys.addaudithook``).
FS_EVENTS = frozenset(
    {"open", "os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir", "shutil.rmtree"}
)


def _kill_at(step: int) -> list[int]:
    """In a child: count its file-system operations from now on, and die at the ``step``-th
    (never, for 0); the count, updated as it goes."""
    seen = [0]

    def hook(event: str, args: tuple) -> None:
        if event in FS_EVENTS:
            seen[0] += 1
            if seen[0] == step:
                os.kill(os.getpid(), signal.SIGKILL)

    sys.addaudithook(hook)
    return seen


def serve(sources: list[str]) -> None:
    """The helper: load the fits in ``sources``; per line ``save INDEX PATH KILL_AT`` fork a
    child that saves fit INDEX to PATH and answer ``pid PID``; per line ``reap`` wait for that
    child and answer ``exit STATUS`` (the child stays a zombie until then, so its pid cannot be
    reused before the test kills it). ``KILL_AT``: -1 runs the save as it is, 0 counts its
    file-system operations (the exit status), k > 0 kills the child at the k-th."""
    fits = [FitResult.load(source) for source in sources]
    scratch = Path(sources[0]).parent / "scratch"
    fits[0].save(scratch)  # imports what a save needs
    start = time.perf_counter()
    fits[1].save(scratch)
    print(f"ready {time.perf_counter() - start}", flush=True)
    child = 0
    for line in sys.stdin:
        command, *args = line.split()
        if command == "save":
            child = os.fork()
            if child == 0:
                kill_at = int(args[2])
                seen = _kill_at(kill_at) if kill_at >= 0 else [0]
                fits[int(args[0])].save(args[1])
                os._exit(seen[0] if kill_at == 0 else 0)
            print(f"pid {child}", flush=True)
        elif command == "reap":
            _, status = os.waitpid(child, 0)
            print(f"exit {status}", flush=True)


class Helper:
    """The test's side of :func:`serve`."""

    def __init__(self, sources: list[Path]) -> None:
        code = f"from {__name__} import serve; serve({list(map(str, sources))!r})"
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.save_seconds = float(self._answer("ready"))

    def _answer(self, word: str) -> str:
        line = self.process.stdout.readline().split()
        assert line and line[0] == word, f"helper said {line!r}, expected {word!r}"
        return line[1]

    def _tell(self, line: str) -> None:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def save(
        self, index: int, path: Path, *, kill_after: float | None = None, kill_at: int = -1
    ) -> int:
        """Save fit ``index`` to ``path`` in a child, killed ``kill_after`` seconds in or at
        its ``kill_at``-th file-system operation; the child's wait status."""
        self._tell(f"save {index} {path} {kill_at}")
        pid = int(self._answer("pid"))
        if kill_after is not None:
            time.sleep(kill_after)
            os.kill(pid, signal.SIGKILL)  # a zombie at worst: the helper has not reaped it
        self._tell("reap")
        return int(self._answer("exit"))

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two tiny fits of different methods (a guide; sampler statistics), saved once."""
    rng = np.random.default_rng(16)
    x = rng.uniform(-1, 1, size=(20, 1))
    model = BNN(x, np.sin(3 * x[:, 0]), hidden=(4,), noise="learned")
    folder = tmp_path_factory.mktemp("sources")
    svi = fit(model, "svi", backend="pyro", seed=1, jit=False, num_steps=5, num_draws=4)
    sgld = fit(
        model, "sgld", backend="pyro", seed=1, jit=False, num_burnin=5, num_samples=3, thinning=1
    )
    return [svi.save(folder / "svi"), sgld.save(folder / "sgld")]


@pytest.fixture(scope="module")
def helper(saved: list[Path]) -> Iterator[Helper]:
    started = Helper(saved)
    yield started
    started.close()


@pytest.fixture(scope="module")
def sources(saved: list[Path]) -> list[FitResult]:
    return [FitResult.load(path) for path in saved]


def _which(path: Path, sources: list[FitResult]) -> int:
    """Which source the folder holds, whole: its method, and every draw, statistic and guide
    parameter of that source."""
    loaded = FitResult.load(path)
    index = [s.method for s in sources].index(loaded.method)
    source = sources[index]
    for name, draws in source.draws.items():
        np.testing.assert_array_equal(loaded.draws[name], draws)
    assert loaded.sample_stats.keys() == source.sample_stats.keys()
    assert (loaded.variational is None) == (source.variational is None)
    assert loaded.info == source.info
    return index


def _finished(status: int) -> bool:
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_kill_at_random_moments_leaves_the_old_or_the_new_fit_whole(
    helper: Helper, sources: list[FitResult], tmp_path: Path
) -> None:
    rng = np.random.default_rng(16)
    killed_midway = 0
    holds: int | None = None  # what the folder holds whole (None: nothing yet)
    for round_ in range(ROUNDS):
        if round_ % FRESH_EVERY == 0:
            target, holds = tmp_path / f"fit{round_}", None
        new = round_ % 2
        delay = rng.uniform(0, 1.2 * helper.save_seconds)
        finished = _finished(helper.save(new, target, kill_after=delay))
        try:
            now = _which(target, sources)
        except FileNotFoundError:
            assert holds is None and not finished  # nothing complete was ever there
            killed_midway += 1
            continue
        assert now == new if finished else now in (holds, new)
        killed_midway += now != new
        holds = now
    # Kills fall inside saves (the test is not vacuous); the next save of a folder clears what
    # they left beside it, and clean_staging what they left anywhere.
    assert killed_midway >= ROUNDS // 4
    sources[0].save(target)
    assert not list(tmp_path.glob(f".{target.name}~*"))
    clean_staging(tmp_path)
    assert not list(tmp_path.glob(".*"))


@pytest.mark.parametrize(("old", "new"), [(0, 1), (1, 0)], ids=["sgld-over-svi", "svi-over-sgld"])
def test_kill_at_every_step_leaves_the_old_or_the_new_fit_whole(
    helper: Helper, saved: list[Path], sources: list[FitResult], tmp_path: Path, old, new
) -> None:
    """Killed at each of the save's file-system operations in turn: the folder holds the old fit
    up to one step and the new one from there on."""
    count = shutil.copytree(saved[old], tmp_path / "count")
    steps = os.WEXITSTATUS(helper.save(new, count, kill_at=0))
    assert steps > 3
    held = []
    for step in range(1, steps + 1):
        target = shutil.copytree(saved[old], tmp_path / f"fit{step}")
        assert not _finished(helper.save(new, target, kill_at=step))
        held.append(_which(target, sources))
    assert held == sorted(held, reverse=old > new)  # once new, new for every later step
    assert {old, new} == set(held)


# --- damaged files ------------------------------------------------------------------------------


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garble(path: Path) -> None:
    """Random bytes over the first 4 KiB (the header of a netCDF file)."""
    data = path.read_bytes()
    size = min(len(data), 4096)
    noise = np.random.default_rng(7).integers(0, 256, size=size, dtype=np.uint8).tobytes()
    path.write_bytes(noise + data[size:])


DAMAGE = {
    "truncated": _truncate,
    "garbled": _garble,
    "empty": lambda path: path.write_bytes(b""),
    "missing": lambda path: path.unlink(),
}
EXPECTED = {
    ("fit.json", "missing"): (FileNotFoundError, r"no saved fit at .*fit.json is missing"),
    ("fit.json", "truncated"): (ResultFileError, r"fit.json is not valid JSON \(truncated or"),
    ("fit.json", "garbled"): (ResultFileError, r"fit.json is not valid JSON \(truncated or"),
    ("fit.json", "empty"): (ResultFileError, r"fit.json is not valid JSON \(truncated or"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("name", ["fit.json", "inference_data.nc", "variational.nc"])
def test_damaged_file_gives_an_error_naming_it(saved, tmp_path, name: str, damage: str) -> None:
    path = Path(shutil.copytree(saved[0], tmp_path / "fit"))
    DAMAGE[damage](path / name)
    default = r"is missing" if damage == "missing" else r"cannot be read \(truncated or corrupt\?\)"
    error, match = EXPECTED.get((name, damage), (ResultFileError, default))
    with pytest.raises(error, match=match) as info:
        FitResult.load(path)
    assert str(path / name) in str(info.value)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[]", r"fit.json holds no JSON object"),
        ('{"schema_version": 1}', r"fit.json lacks the key\(s\) 'spec', 'method'"),
        ('{"schema_version": 7}', r"fit.json has schema version 7, this version of ppl_bnn reads"),
    ],
)
def test_fit_json_of_the_wrong_shape_is_named(saved, tmp_path, text: str, match: str) -> None:
    path = Path(shutil.copytree(saved[0], tmp_path / "fit"))
    (path / "fit.json").write_text(text)
    with pytest.raises(ResultFileError, match=match):
        FitResult.load(path)
