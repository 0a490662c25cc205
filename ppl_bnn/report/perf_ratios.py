"""The performance report's numbers: each backend's floor and the headline ratios, formed from
the probes' stored rows (:func:`ppl_bnn.report.perf.rows_frame`), two rows of the same run to a
ratio.

What a backend calls its paths and gradients, and which path another is compared with, comes
from its ``perf`` module (:class:`ppl_bnn.engine.perf.Perf`); the default backend is the one
every other is compared with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ppl_bnn.bench.perf_suite import perf_backends, perf_module
from ppl_bnn.engine.registry import DEFAULT_BACKEND, backend_names, declaration
from ppl_bnn.report import fmt
from ppl_bnn.report.load import BACKEND_ORDER


def value(frame: pd.DataFrame, quantity: str, stat: str = "median", **labels: Any) -> float:
    """The ``stat`` of the one row matching ``quantity`` and ``labels``, or NaN."""
    if frame.empty:
        return math.nan
    mask = frame["quantity"] == quantity
    for key, wanted in labels.items():
        mask &= frame[key].astype(str) == str(wanted)
    hits = frame[mask]
    return float(hits[stat].iloc[0]) if len(hits) == 1 else math.nan


def ratio(a: float, b: float) -> float:
    return a / b if b and math.isfinite(a) and math.isfinite(b) else math.nan


@dataclass(frozen=True)
class Floor:
    """One backend's floor per gradient on a problem (seconds, medians over repeats).

    Attributes:
        bare: Its cheapest bare gradient (a variant named ``bare...``: the potential written
            in the framework, no PPL in between).
        any: Its cheapest gradient of any kind (the PPL's own potentials included).
        kernel: Its NUTS kernel per leapfrog step on a nearly free potential; NaN where the
            kernel is compiled with the potential (no kernel floor apart).
    """

    bare: float
    any: float
    kernel: float

    @property
    def sampler(self) -> float:
        """What NUTS per gradient can be no cheaper than: kernel + :attr:`bare`."""
        return self.kernel + self.bare if math.isfinite(self.kernel) else self.bare

    @property
    def strict(self) -> float:
        """The same with :attr:`any`: kernel + the cheapest gradient of any kind."""
        return self.kernel + self.any if math.isfinite(self.kernel) else self.any


def floors(frame: pd.DataFrame, problem: str) -> dict[str, Floor]:
    """Each backend's :class:`Floor` on ``problem``, for the backends whose gradients the floor
    probe measured."""
    grads = frame[
        (frame["quantity"] == "grad_s")
        & (frame["problem"] == problem)
        & frame["probe"].str.startswith("floor-")
    ]
    out = {}
    for backend in backends_of(grads):
        mine = grads[grads["backend"] == backend]
        bare = mine[mine["variant"].astype(str).str.startswith("bare")]
        out[backend] = Floor(
            bare=float(bare["median"].min()) if len(bare) else math.nan,
            any=float(mine["median"].min()),
            kernel=value(
                frame, "kernel_s_per_step", problem=problem, backend=backend, variant="nuts"
            ),
        )
    return out


def backends_of(frame: pd.DataFrame) -> list[str]:
    """The backends of ``frame``'s rows: the registered ones in registry order, then others."""
    present = [b for b in frame["backend"].drop_duplicates() if b]
    order = {b: i for i, b in enumerate(BACKEND_ORDER)}
    return sorted(present, key=lambda b: (order.get(b, len(order)), b))


def backend_title(backend: str) -> str:
    return declaration(backend).display_name if backend in backend_names() else backend


def backend_framework(backend: str) -> str:
    return declaration(backend).framework if backend in backend_names() else backend


def perf_of(backend: str) -> Any:
    """``backend``'s ``perf`` module, or None where it has none here."""
    return perf_module(backend) if backend in perf_backends() else None


def _path(backend: str, method: str) -> str:
    """The path of ``method`` on ``backend`` that others are compared with (``"default"``)."""
    perf = perf_of(backend)
    return perf.REFERENCE_PATHS.get(method, "default") if perf else "default"


def _path_label(backend: str, method: str, path: str) -> str:
    perf = perf_of(backend)
    return perf.PATHS.get(method, {}).get(path, path) if perf else path


def _named(backend: str, method: str) -> str:
    """``"Pyro NUTS (compiled)"``: a backend, a method and its path, where it has several."""
    path = _path(backend, method)
    return f"{backend_title(backend)} {method.upper()}" + (
        "" if path == "default" else f" ({path})"
    )


def headline(frame: pd.DataFrame, problem: str = "sine") -> list[tuple[str, float, str]]:
    """``(what, ratio, how it is formed)`` for the ratios the report quotes."""
    return [
        *_path_ratios(frame, problem),
        *_floor_ratios(frame, problem),
        *_cross_backend_ratios(frame, problem),
        *_overhead_ratios(frame, problem),
        *_throughput_ratios(frame),
        *compile_cache_ratios(frame),
    ]


def _per(
    frame: pd.DataFrame, problem: str, method: str, backend: str, variant: str,
    quantity: str = "grad_s",
) -> float:  # fmt: skip
    """The median ``quantity`` of one (method, backend, variant) on ``problem``."""
    return value(frame, quantity, problem=problem, method=method, backend=backend, variant=variant)


#: The methods the headline compares, with the cost it compares them by.
_COSTS: tuple[tuple[str, str, str], ...] = (
    ("nuts", "grad_s", "per gradient"),
    ("svi", "step_s", "per step"),
    ("sgld", "step_s", "per step"),
)


#: The costs by which each other backend is compared with the default one.
_CROSS_COSTS = (*_COSTS[:1], ("nuts", "s_per_ess", "per effective sample"), *_COSTS[1:])


def _path_ratios(frame: pd.DataFrame, problem: str) -> list[tuple[str, float, str]]:
    """Each backend's other paths of a method against its reference path (Pyro's own potential
    and ``SVI.step`` against its compiled potential and fused update)."""
    out = []
    methods = frame[frame["probe"].str.startswith("method-")]
    for backend in backends_of(methods):
        for method, quantity, unit in _COSTS:
            ref = _path(backend, method)
            rows = methods[(methods["backend"] == backend) & (methods["method"] == method)]
            perf = perf_of(backend)
            for path in rows["variant"].drop_duplicates():
                if path == ref:
                    continue
                what = (
                    f"{backend_title(backend)} {method.upper()} {unit}, "
                    f"{_path_label(backend, method, path)} / {_path_label(backend, method, ref)}"
                )
                goal = perf.GOALS.get((method, path), "speed-up") if perf else "speed-up"
                cost = _per(frame, problem, method, backend, path, quantity)
                out.append(
                    (what, ratio(cost, _per(frame, problem, method, backend, ref, quantity)), goal)
                )
    return out


def _floor_ratios(frame: pd.DataFrame, problem: str) -> list[tuple[str, float, str]]:
    """Each backend's NUTS per gradient against its floor: kernel + cheapest bare gradient
    (target <= 1.1), or the bare gradient alone where the kernel is compiled with it."""
    out = []
    for backend, floor in floors(frame, problem).items():
        nuts = _per(frame, problem, "nuts", backend, _path(backend, "nuts"))
        framework = backend_framework(backend)
        if math.isfinite(floor.kernel):
            out += [
                (
                    f"{_named(backend, 'nuts')} per gradient / floor (kernel + cheapest bare "
                    f"{framework} gradient)",
                    ratio(nuts, floor.sampler),
                    "target <= 1.1",
                ),
                (
                    f"{_named(backend, 'nuts')} per gradient / strict floor (kernel + cheapest "
                    f"{framework} gradient of any kind)",
                    ratio(nuts, floor.strict),
                    "target <= 1.1",
                ),
            ]
        else:
            out.append(
                (
                    f"{_named(backend, 'nuts')} per gradient / floor (cheapest bare {framework} "
                    "gradient)",
                    ratio(nuts, floor.sampler),
                    "overhead of the sampler",
                )
            )
    return out


def _cross_backend_ratios(frame: pd.DataFrame, problem: str) -> list[tuple[str, float, str]]:
    """Each other backend against the default one: NUTS per gradient and per effective sample,
    SVI and SGLD per step, each on its reference path."""
    out = []
    methods = frame[frame["probe"].str.startswith("method-")]
    others = [b for b in backends_of(methods) if b != DEFAULT_BACKEND]
    for backend in others:
        for method, quantity, unit in _CROSS_COSTS:
            mine, theirs = (
                _per(frame, problem, method, b, _path(b, method), quantity)
                for b in (backend, DEFAULT_BACKEND)
            )
            what = f"{_named(backend, method)} / {_named(DEFAULT_BACKEND, method)}, {unit}"
            out.append((what, ratio(mine, theirs), "cost ratio"))
    return out


def _overhead_ratios(frame: pd.DataFrame, problem: str) -> list[tuple[str, float, str]]:
    """``fit`` against the PPL called directly, per backend and algorithm."""
    out = []
    calls = frame[frame["quantity"] == "call_s"]
    for backend in backends_of(calls):
        for algorithm in calls[calls["backend"] == backend]["method"].drop_duplicates():
            fit_s, direct = (
                value(frame, "call_s", "min", problem=problem, method=algorithm,
                       backend=backend, variant=how)
                for how in ("fit", "direct")
            )  # fmt: skip
            out.append(
                (
                    f"{backend_title(backend)} {str(algorithm).upper()}: fit / the library called "
                    "directly (fastest repeats)",
                    ratio(fit_s, direct),
                    "target <= 1.1",
                )
            )
    return out


def _throughput_ratios(frame: pd.DataFrame) -> list[tuple[str, float, str]]:
    """Cells at once: the sweep's throughput and a cell's slow-down, with and without a JAX
    cache."""
    out = []
    for cache, what in (
        ("warm", "JAX cache filled beforehand, as the bench runs"),
        ("none", "no JAX cache: every NumPyro cell compiles"),
    ):

        def sweeps(quantity: str, jobs: int, cache: str = cache) -> float:
            return value(frame, quantity, "min", variant=f"jobs{jobs}", cache=cache)

        out.append(
            (
                f"Cell throughput, --jobs 2 / --jobs 1 ({what})",
                ratio(sweeps("sweep_wall_s", 1), sweeps("sweep_wall_s", 2)),
                "target >= 1.7" if cache == "warm" else "throughput",
            )
        )
        out.append(
            (
                f"Summed cell wall times, --jobs 2 / --jobs 1 ({what})",
                ratio(sweeps("cell_time_s", 2), sweeps("cell_time_s", 1)),
                "slow-down of a cell that shares the cores",
            )
        )
    return out


def compile_cache_ratios(frame: pd.DataFrame) -> list[tuple[str, float, str]]:
    """Per method of the compile_cache probe: compile time in a new process with an empty JAX
    cache over the same with the cache the first process filled (medians over repeats)."""
    if frame.empty:
        return []
    warm = frame[(frame["quantity"] == "compile_s") & (frame["variant"] == "warm")]
    out = []
    for (backend, method), _ in warm.groupby(["backend", "method"], sort=False):
        cold_s, warm_s = (
            value(frame, "compile_s", method=method, backend=backend, variant=v)
            for v in ("cold", "warm")
        )
        out.append(
            (
                f"{backend_title(backend)} {str(method).upper()} compile time in a new process, "
                f"empty {backend_framework(backend)} cache / cache filled by the same fit in "
                "another process",
                ratio(cold_s, warm_s),
                f"speed-up; {seconds(warm_s)} with the cache (should be seconds)",
            )
        )
    return out


def seconds(value: float) -> str:
    """A duration with a unit that keeps 3 significant digits readable."""
    if not math.isfinite(value):
        return ""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("\u00b5s", 1e-6)):
        if abs(value) >= scale:
            return f"{fmt.number(value / scale)} {unit}"
    return f"{fmt.number(value / 1e-9)} ns"
