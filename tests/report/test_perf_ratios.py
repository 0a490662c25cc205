"""The performance report's floors and headline ratios, formed from stored rows: each backend
named and its paths labelled by its perf module, every other backend against the default one."""

from __future__ import annotations

from typing import Any

import pytest

from ppl_bnn.report.perf import rows_frame
from ppl_bnn.report.perf_ratios import floors, headline


def _row(quantity: str, median: float, **labels: Any) -> dict[str, Any]:
    return {"quantity": quantity, "unit": "s", "values": [median], "min": median, "median": median,
            "problem": "sine", **labels}  # fmt: skip


def _records() -> list[dict[str, Any]]:
    floor = [
        _row("grad_s", 1e-5, backend="numpyro", variant="bare_jit"),
        _row("grad_s", 4e-5, backend="pyro", variant="bare_eager"),
        _row("grad_s", 3e-5, backend="pyro", variant="bare_traced"),
        _row("grad_s", 2e-5, backend="pyro", variant="pyro_compiled"),
        _row("kernel_s_per_step", 1e-5, backend="pyro", variant="nuts"),
    ]
    methods = [
        ("nuts", "numpyro", "default", "grad_s", 2e-5),
        ("nuts", "numpyro", "default", "s_per_ess", 1e-3),
        ("nuts", "pyro", "compiled", "grad_s", 6e-5),
        ("nuts", "pyro", "compiled", "s_per_ess", 4e-3),
        ("nuts", "pyro", "pyro", "grad_s", 3e-4),
        ("svi", "numpyro", "default", "step_s", 1e-4),
        ("svi", "pyro", "fused", "step_s", 2e-4),
        ("svi", "pyro", "eager", "step_s", 8e-4),
        ("svi", "stan", "default", "step_s", 5e-4),
    ]
    records = [{"cell_id": "floor-sine", "perf": floor}]
    for method, backend, variant, quantity, median in methods:
        row = _row(quantity, median, method=method, backend=backend, variant=variant)
        records.append({"cell_id": f"method-sine-{method}-{backend}-{variant}", "perf": [row]})
    return records


def test_floors_are_per_backend_with_a_kernel_only_where_it_runs_apart() -> None:
    f = floors(rows_frame(_records()), "sine")
    assert list(f) == ["numpyro", "pyro"]
    assert f["pyro"].sampler == pytest.approx(1e-5 + 3e-5)
    assert f["pyro"].strict == pytest.approx(1e-5 + 2e-5)
    assert f["numpyro"].sampler == f["numpyro"].strict == pytest.approx(1e-5)


def test_headline_names_each_backends_paths_and_compares_others_with_the_default() -> None:
    ratios = {what: (value, how) for what, value, how in headline(rows_frame(_records()))}
    expected = {
        "Pyro NUTS per gradient, Pyro's default path / compiled flat potential": (5, "speed-up"),
        "Pyro SVI per step, Pyro's default (Trace_ELBO, SVI.step) / fused (JitTrace_ELBO, one "
        "Adam)": (4, "speed-up, target >= 2"),
        "Pyro NUTS (compiled) per gradient / floor (kernel + cheapest bare torch gradient)": (
            1.5, "target <= 1.1",
        ),
        "Pyro NUTS (compiled) per gradient / strict floor (kernel + cheapest torch gradient of "
        "any kind)": (2, "target <= 1.1"),
        "NumPyro NUTS per gradient / floor (cheapest bare JAX gradient)": (
            2, "overhead of the sampler",
        ),
        "Pyro NUTS (compiled) / NumPyro NUTS, per gradient": (3, "cost ratio"),
        "Pyro NUTS (compiled) / NumPyro NUTS, per effective sample": (4, "cost ratio"),
        "Pyro SVI (fused) / NumPyro SVI, per step": (2, "cost ratio"),
        # A backend not registered here is named as stored, on its one path.
        "stan SVI / NumPyro SVI, per step": (5, "cost ratio"),
    }  # fmt: skip
    for what, (value, how) in expected.items():
        assert ratios[what][0] == pytest.approx(value), what
        assert ratios[what][1] == how, what
