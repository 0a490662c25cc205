"""The memory check before a fit (:mod:`ppl_bnn.methods.memory`): a network too large is refused
up front with the cause first, and the bound counts what each method holds."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, fit
from ppl_bnn.methods import get_method, make_options, memory
from ppl_bnn.methods.memory import FLOAT32, FLOAT64, InsufficientMemoryError, required_bytes

GiB = 1024**3


def _model(hidden: tuple[int, ...], n: int = 20) -> BNN:
    x = np.linspace(-1, 1, n)[:, None]
    return BNN(x, x[:, 0], hidden=hidden, noise=0.1)


def _options(method: str, **options):
    return make_options(get_method(method, "numpyro"), options)


def test_a_network_too_large_is_refused_before_anything_is_allocated(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: 8 * GiB)
    # 200,000 x 200,000 weights: 149 GiB for one float32 copy, never allocated here.
    model = _model((200_000, 200_000))
    with pytest.raises(InsufficientMemoryError, match=r"^not enough memory for 'map'") as info:
        fit(model, "map", num_steps=2)
    message = str(info.value)
    assert "it needs at least 447.0 GiB" in message
    assert "1 draw of 40,000,800,001 weights: 149.0 GiB" in message
    assert "and 8.0 GiB is available" in message


def test_draws_that_do_not_fit_are_named_with_their_count(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: GiB)
    model = _model((100, 100))  # 10,401 weights: 42 MB per 1,000 draws
    # A uniform start: no MAP fit to compile first (the bound does not depend on the start).
    fit(model, "svi", num_steps=2, num_draws=1000, init_loc="uniform")
    with pytest.raises(InsufficientMemoryError, match=r"30,000 draws of 10,401 weights: 1\.2 GiB"):
        fit(model, "svi", num_steps=2, num_draws=30_000, init_loc="uniform")


@pytest.mark.parametrize(
    ("method", "options", "draws", "matrix"),
    [
        ("map", {}, 1, 0),
        ("svi", {"num_draws": 7}, 7, 0),
        ("fullrank", {"num_draws": 7}, 7, "P*P"),
        ("lowrank", {"num_draws": 7, "rank": 3}, 7, "3*P"),
        ("lowrank", {"num_draws": 7}, 7, "sqrtP*P"),
        ("nuts", {"num_chains": 2, "num_samples": 5}, 10, 0),
        ("nuts", {"num_samples": 5, "dense_mass": True}, 5, "P*P"),
        ("sgld", {"num_chains": 3, "num_samples": 4}, 12, 0),
        ("swag", {"num_draws": 9, "rank": 4, "num_snapshots": 4}, 9, "4*P"),
        ("multiswag", {"num_draws": 9, "num_members": 2, "rank": 4, "num_snapshots": 4}, 18, "4*P"),
        ("mcdropout", {"num_draws": 11}, 11, 0),
        ("ensemble", {"num_members": 4}, 4, 0),
    ],
)
def test_the_bound_counts_each_methods_draws_and_matrices(method, options, draws, matrix):
    model = _model((10,), n=20)  # P = 10 + 10 + 10 + 1 = 31 weights
    weights = 31
    matrices = {0: 0, "P*P": 31 * 31, "3*P": 3 * 31, "4*P": 4 * 31, "sqrtP*P": 6 * 31}
    parts = required_bytes(model.spec, _options(method, **options), 20)
    assert sorted(parts.values(), reverse=True) == sorted(
        [
            draws * weights * FLOAT32,
            2 * weights * FLOAT32,
            matrices[matrix] * FLOAT32,
            draws * 20 * (FLOAT64 + FLOAT32),
        ],
        reverse=True,
    )


def test_available_memory_is_the_smaller_of_the_machines_and_the_cgroups(tmp_path, monkeypatch):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:    2000000 kB\n")
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    monkeypatch.setattr(memory, "_MEMINFO", meminfo)
    monkeypatch.setattr(memory, "_CGROUP", cgroup)
    assert memory.available_bytes() == 2_000_000 * 1024  # no cgroup files
    (cgroup / "memory.max").write_text("max\n")
    assert memory.available_bytes() == 2_000_000 * 1024  # no cgroup limit
    (cgroup / "memory.max").write_text("1000000000\n")
    (cgroup / "memory.current").write_text("400000000\n")
    assert memory.available_bytes() == 600_000_000
    meminfo.unlink()
    assert memory.available_bytes() == 600_000_000
    (cgroup / "memory.max").unlink()
    assert memory.available_bytes() is None


def test_no_check_where_the_available_memory_is_unknown(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: None)
    model = _model((3,))
    memory.check_memory("svi", model.spec, _options("svi", num_draws=10**9), 20)
    monkeypatch.setattr(memory, "available_bytes", lambda: 10**6)
    with pytest.raises(InsufficientMemoryError, match=r"and 976\.6 KiB is available"):
        memory.check_memory("svi", model.spec, _options("svi", num_draws=10**9), 20)
