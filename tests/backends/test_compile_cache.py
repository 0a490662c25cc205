"""JAX's persistent compilation cache for NumPyro fits: where it is, switching it off, counting
its hits, and surviving a corrupt or unwritable cache.

Every test points the cache at ``tmp_path`` (tests/conftest.py gives the session its own), and
fits with a number of steps no other test uses, so that its program is new to this process
(JAX keeps compiled programs in memory too, and only a compilation writes to the disk cache).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ppl_bnn import BNN, FitResult, configure_runtime, fit
from ppl_bnn.backends.numpyro import programs
from ppl_bnn.backends.numpyro.compile_cache import ENV_VAR, requested_dir

pytestmark = pytest.mark.runtime(160)  # seconds on 2 cores: started first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def default_setting() -> Iterator[None]:
    """Every test leaves ``configure_runtime(jax_cache=...)`` at its default."""
    yield
    configure_runtime(jax_cache=True)


@pytest.fixture(autouse=True)
def _no_kept_programs() -> None:
    """Each test counts the compilations of its own fits: none reuses a program an earlier
    test's fit left in this process (:mod:`ppl_bnn.backends.numpyro.programs`)."""
    programs._programs.clear()


def _fit(steps: int) -> FitResult:
    """A MAP fit, the NumPyro fit with the fewest programs to compile (one optimisation)."""
    x = np.linspace(-1, 1, 12)[:, None]
    model = BNN(x, np.sin(3 * x[:, 0]), hidden=(3,), noise="learned")
    return fit(model, "map", seed=0, num_steps=steps)


def _entries(path: Path) -> set[str]:
    return {p.name for p in path.glob("*-cache")} if path.is_dir() else set()


# --- where the cache is ------------------------------------------------------------------------


def test_the_cache_dir_is_configured_else_the_env_var_else_the_user_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert requested_dir() == tmp_path / "xdg" / "ppl_bnn" / "jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert requested_dir() == tmp_path / "home" / ".cache" / "ppl_bnn" / "jax"
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env"))
    assert requested_dir() == tmp_path / "env"
    configure_runtime(jax_cache=tmp_path / "mine")
    assert requested_dir() == tmp_path / "mine"
    configure_runtime(jax_cache=False)
    assert requested_dir() is None
    configure_runtime(jax_cache=True)
    assert requested_dir() == tmp_path / "env"


@pytest.mark.parametrize("value", ["off", "0", "false", "FALSE", " Off "])
def test_the_env_var_switches_the_cache_off(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, value)
    assert requested_dir() is None


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (3, TypeError, "jax_cache must be a directory, True or False, got int 3"),
        ("  ", ValueError, "jax_cache must name a directory, got '  '"),
    ],
)
def test_bad_cache_settings_are_refused(value: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        configure_runtime(jax_cache=value)  # type: ignore[arg-type]


# --- fits in this process ----------------------------------------------------------------------


def test_a_fit_fills_the_cache_and_records_its_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    monkeypatch.setenv(ENV_VAR, str(first))
    with caplog.at_level(logging.INFO, logger="ppl_bnn.backends.numpyro.compile_cache"):
        info = _fit(211).info["jax_cache"]
    assert info["dir"] == str(first) and info["compiles"] > 0
    assert _entries(first)
    message = f"JAX compilation cache: {info['cache_hits']} hits, {info['compiles']} compilations"
    assert f"{message} ({first})" in caplog.text
    # JAX opened its cache in `first`; a new directory takes effect at the next fit.
    filled = _entries(first)
    monkeypatch.setenv(ENV_VAR, str(second))
    assert _fit(223).info["jax_cache"]["dir"] == str(second)
    assert _entries(second) and _entries(first) == filled


@pytest.mark.parametrize("how", ["env", "configure_runtime"])
def test_opting_out_writes_nothing(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv(ENV_VAR, str(cache))
    _fit(227)  # JAX's cache is open in `cache`
    filled = _entries(cache)
    if how == "env":
        monkeypatch.setenv(ENV_VAR, "off")
    else:
        configure_runtime(jax_cache=False)
    info = _fit(229).info["jax_cache"]
    assert info == {"dir": None, "compiles": info["compiles"], "cache_hits": 0}
    assert info["compiles"] > 0 and _entries(cache) == filled


def test_configure_runtime_overrides_the_env_var(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env"))
    configure_runtime(jax_cache=tmp_path / "mine")
    assert _fit(233).info["jax_cache"]["dir"] == str(tmp_path / "mine")
    assert _entries(tmp_path / "mine") and not _entries(tmp_path / "env")


def test_a_jax_cache_dir_set_by_the_user_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    monkeypatch.setenv(ENV_VAR, str(tmp_path / "ours"))
    _fit(239)  # JAX's cache is open in `ours`; the user then sets theirs, as JAX's guide says
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "theirs"))
    try:
        info = _fit(241).info["jax_cache"]
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "theirs")
    finally:  # unset again: later fits get ppl_bnn's directory
        jax.config.update("jax_compilation_cache_dir", None)
        compilation_cache.reset_cache()
    assert info["dir"] == str(tmp_path / "theirs") and _entries(tmp_path / "theirs")
    filled = _entries(tmp_path / "ours")
    assert _fit(269).info["jax_cache"]["dir"] == str(tmp_path / "ours")
    assert _entries(tmp_path / "ours") > filled


def test_an_unwritable_cache_dir_warns_and_fits_without_a_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "a-file" / "jax"))
    with caplog.at_level(logging.WARNING):
        result = _fit(251)
    assert result.info["jax_cache"]["dir"] is None
    assert np.isfinite(result.draws["w0"]).all()
    assert f"cannot write to {tmp_path / 'a-file' / 'jax'}" in caplog.text


def test_repeated_fits_add_no_monitoring_listeners() -> None:
    from jax._src import monitoring  # jax.monitoring has no public way to list listeners

    _fit(257)
    before = len(monitoring.get_event_duration_listeners())
    _fit(257)
    _fit(263)
    assert len(monitoring.get_event_duration_listeners()) == before


# --- new processes -----------------------------------------------------------------------------

# One fit in a new process; prints its cache counts and draws as JSON.
_FIT_SCRIPT = """
import json
import numpy as np
from ppl_bnn import BNN, fit

x = np.linspace(-1, 1, 12)[:, None]
model = BNN(x, np.sin(3 * x[:, 0]), hidden=(3,), noise="learned")
result = fit(model, "svi", seed=0, num_steps=20, num_draws=5)
print(json.dumps({"cache": result.info["jax_cache"], "w0": result.draws["w0"].tolist()}))
"""


def _fit_in_new_process(cache: Path, hash_seed: int) -> tuple[dict, str]:
    # Each process hashes strings with its own seed: the SVI program, and so its cache key,
    # must not depend on it (NumPyro's Trace_ELBO orders its terms by a set of site names).
    env = {**os.environ, ENV_VAR: str(cache), "PYTHONHASHSEED": str(hash_seed)}
    out = subprocess.run(
        [sys.executable, "-c", _FIT_SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


@pytest.mark.slow
def test_a_new_process_loads_the_cache_and_survives_corrupt_entries(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cold, _ = _fit_in_new_process(cache, 1)
    assert cold["cache"]["dir"] == str(cache) and cold["cache"]["compiles"] > 0
    warm, _ = _fit_in_new_process(cache, 2)
    assert warm["cache"]["compiles"] == 0 and warm["cache"]["cache_hits"] > 0
    assert warm["w0"] == cold["w0"]
    entries = list(cache.glob("*-cache"))
    for entry in entries:  # as a process killed while writing would leave them
        entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])
    corrupt, stderr = _fit_in_new_process(cache, 3)
    assert corrupt["cache"]["cache_hits"] == 0 and corrupt["cache"]["compiles"] > 0
    assert corrupt["w0"] == cold["w0"]
    assert "Error reading persistent compilation cache entry" in stderr


def test_a_pyro_fit_never_imports_jax(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "import numpy as np\n"
        "from ppl_bnn import BNN, configure_runtime, fit\n"
        f"configure_runtime(jax_cache={str(tmp_path / 'cache')!r})\n"
        "x = np.linspace(-1, 1, 12)[:, None]\n"
        "fit(BNN(x, x[:, 0], hidden=(), noise=0.1), 'map', backend='pyro', num_steps=5)\n"
        "print('jax' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "False"
    assert not (tmp_path / "cache").exists()
