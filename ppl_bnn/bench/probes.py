"""Performance probes: what each (method, backend) costs, measured against its backend's floor.

Every probe returns ``rows``: one per measured quantity, with the values of every repeat and
their min and median, all from the same process and run (:func:`run_probe`). Ratios are formed
by the report from rows of the same run, never from numbers measured elsewhere.
"""

from __future__ import annotations

import logging
import statistics
import tempfile
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ppl_bnn.bench import lenet, pool
from ppl_bnn.bench.cell import Probe, model_arguments
from ppl_bnn.bench.evaluate import evaluate
from ppl_bnn.bench.perf_suite import (
    THROUGHPUT_CACHES,
    cached_backends,
    framework_key,
    perf_backends,
    perf_module,
)
from ppl_bnn.bench.record import read_records
from ppl_bnn.bench.runner import SweepSummary, run_suite
from ppl_bnn.bench.suite import Suite, parse_suite
from ppl_bnn.data import load_dataset
from ppl_bnn.fit import fit
from ppl_bnn.methods import backend_options, get_method
from ppl_bnn.methods.nuts import NUTSOptions
from ppl_bnn.methods.svi import SVIOptions
from ppl_bnn.model.bnn import BNN
from ppl_bnn.model.flat import FlatLayout
from ppl_bnn.timing import CompileClock, now

logger = logging.getLogger(__name__)


def row(quantity: str, values: Sequence[float], unit: str = "s", **labels: Any) -> dict[str, Any]:
    """One measured quantity: every repeat's value, their min and median, and labels."""
    vals = [float(v) for v in values]
    finite = [v for v in vals if np.isfinite(v)]
    return {
        "quantity": quantity,
        "unit": unit,
        **labels,
        "values": vals,
        "min": min(finite) if finite else float("nan"),
        "median": statistics.median(finite) if finite else float("nan"),
    }


def problem_model(params: dict[str, Any], data_dir: str | None = None) -> tuple[BNN, Any]:
    """The probe's model bound to its dataset's training split, and the dataset."""
    limits = {"max_train": params["max_train"]} if params.get("max_train") else {}
    data = load_dataset(params["dataset"], data_dir=data_dir, **limits)
    model = BNN(data.x_train, data.y_train, **model_arguments(params.get("model", {}), data))
    return model, data


def synthetic_model(n: int, width: int, input_dim: int = 8, seed: int = 0) -> BNN:
    """A regression BNN with one tanh layer of ``width`` units on ``n`` synthetic points."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, input_dim))
    y = np.sin(x.sum(axis=1) / np.sqrt(input_dim)) + 0.1 * rng.normal(size=n)
    return BNN(x, y, hidden=(width,), activation="tanh", noise="learned")


def _gradient_rows(
    model: BNN, params: dict[str, Any], scaling: bool, **labels: Any
) -> list[dict[str, Any]]:
    """Every backend's bare gradients (``params["<framework>_variants"]``, default: all of its
    ``GRADIENT_VARIANTS``, or its ``SCALING_VARIANTS`` for the scaling probe), with the compile
    time of those that compile ahead."""
    rows = []
    for backend in perf_backends():
        perf = perf_module(backend)
        default = perf.SCALING_VARIANTS if scaling else tuple(perf.GRADIENT_VARIANTS)
        costs, compiles = perf.gradient_costs(
            model,
            calls=params.get(framework_key(backend, "calls"), perf.DEFAULT_CALLS),
            repeats=params["repeats"],
            variants=tuple(params.get(framework_key(backend, "variants"), default)),
        )
        for quantity, measured in (("grad_s", costs), ("compile_s", compiles)):
            rows += [
                row(quantity, values, backend=backend, variant=variant, **labels)
                for variant, values in measured.items()
            ]
    return rows


def floor(probe: Probe, data_dir: str | None) -> list[dict[str, Any]]:
    """Every backend's bare gradients and its kernels' cost per leapfrog step."""
    params = probe.params
    model, _ = problem_model(params, data_dir)
    labels = {"problem": params["problem"]}
    rows = _gradient_rows(model, params, scaling=False, **labels)
    size = FlatLayout.of(model.spec).size
    for backend in perf_backends():
        kernels = perf_module(backend).kernel_costs(
            size, draws=params.get("kernel_draws", 100), repeats=params["repeats"]
        )
        rows += [
            row("kernel_s_per_step", values, backend=backend, variant=kernel, **labels)
            for kernel, values in kernels.items()
        ]
    rows.append(row("num_params", [size], unit="", backend="", variant="", **labels))
    return rows


def method(probe: Probe, data_dir: str | None) -> list[dict[str, Any]]:
    """``fit`` + evaluation, repeated: compile, per gradient / per step, per effective sample."""
    params = probe.params
    model, data = problem_model(params, data_dir)
    collected: dict[str, list[float]] = {}
    info: dict[str, Any] = {}
    for _ in range(params["repeats"]):
        result = fit(
            model, params["method"], backend=params["backend"], seed=0, **params["options"]
        )
        metrics = evaluate(result, data).metrics
        info = result.info
        values = {
            "compile_s": result.timings.get("compile", float("nan")),
            "run_s": result.timings.get("warmup", 0.0) + result.timings.get("sampling", 0.0),
            "grad_s": metrics.get("s_per_grad", float("nan")),
            "step_s": metrics.get("s_per_step", float("nan")),
            "ess_bulk_median": metrics.get("ess_bulk_median", float("nan")),
            "s_per_ess": 1.0 / metrics["ess_per_s"] if metrics.get("ess_per_s") else float("nan"),
            "test_ll": metrics.get("test_ll", float("nan")),
        }
        for key, value in values.items():
            collected.setdefault(key, []).append(value)
    labels = {
        "problem": params["problem"],
        "method": params["method"],
        "backend": params["backend"],
        "variant": params["variant"],
        "mode": info.get("pyro_mode") or info.get("elbo") or "",
        "threads": info.get("torch_threads", ""),
    }
    return [
        row(k, v, unit="" if k in ("ess_bulk_median", "test_ll") else "s", **labels)
        for k, v in collected.items()
        if np.isfinite(v).any()
    ]


def _seconds_apart_from_compiling(fn: Callable[[], Any]) -> float:
    """Wall seconds of ``fn()`` less the JAX compilation inside it."""
    with CompileClock() as clock:
        start = now()
        fn()
        end = now()
    return (end - start) - clock.compile_seconds(start, end)


def overhead(probe: Probe, data_dir: str | None) -> list[dict[str, Any]]:
    """NUTS and SVI through ``fit`` vs the same algorithm called directly in the probe's
    backend's PPL on the same model, keys and settings (:meth:`~ppl_bnn.engine.perf.Perf.
    direct_calls`): wall time of the whole call less JAX compilation.

    ``fit`` also computes the pointwise training log-likelihood and converts draws to numpy;
    that is part of its overhead. Both SVI runs start as the PPL's ``AutoNormal`` does: the
    suite gives ``fit``'s SVI ``init_loc="uniform"``
    (:data:`~ppl_bnn.bench.perf_suite.OVERHEAD_SVI_START`).
    """
    params, backend = probe.params, probe.backend
    model, _ = problem_model(params, data_dir)
    options = {"nuts": NUTSOptions(**params["nuts"]), "svi": SVIOptions(**params["svi"])}
    calls: dict[tuple[str, str], Callable[[], Any]] = {}
    for method, direct in perf_module(backend).direct_calls(model, **options).items():
        given = backend_options(get_method(method, backend), backend, params[method])
        calls[method, "fit"] = partial(fit, model, method, backend=backend, **given)
        calls[method, "direct"] = direct
    seconds: dict[tuple[str, str], list[float]] = {key: [] for key in calls}
    for _ in range(params["repeats"]):
        for key, call in calls.items():
            seconds[key].append(_seconds_apart_from_compiling(call))
    return [
        row("call_s", values, problem=params["problem"], method=m, backend=backend, variant=how)
        for (m, how), values in seconds.items()
    ]


def predict(probe: Probe, data_dir: str | None) -> list[dict[str, Any]]:
    """``FitResult.predict`` of ``draws`` posterior draws at ``points`` inputs, per backend
    (the first call, which compiles, is reported apart), with the parallelism it had (host
    devices, threads: :meth:`~ppl_bnn.engine.perf.Perf.parallelism`)."""
    params = probe.params
    model, _ = problem_model(params, data_dir)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(params["points"], model.spec.input_dim))
    rows = []
    for backend in perf_backends():
        result = fit(model, "svi", backend=backend, seed=0, num_steps=10, num_draws=params["draws"])
        start = now()
        result.predict(x)
        first = now() - start
        values = []
        for _ in range(params["repeats"]):
            start = now()
            pred = result.predict(x)
            values.append(now() - start)
        assert pred.f.shape[:2] == (params["draws"], params["points"])
        labels = {
            "problem": params["problem"],
            "backend": backend,
            "draws": params["draws"],
            "points": params["points"],
            "parallel": perf_module(backend).parallelism(),
        }
        rows.append(row("predict_s", values, variant="warm", **labels))
        rows.append(row("predict_s", [first], variant="first_call", **labels))
    return rows


def scaling(probe: Probe, data_dir: str | None) -> list[dict[str, Any]]:
    """Floors and NUTS per gradient on both backends for one (n, width) of a synthetic set."""
    params = probe.params
    model = synthetic_model(params["n"], params["width"], params.get("input_dim", 8))
    labels = {"n": params["n"], "width": params["width"]}
    rows = _gradient_rows(model, params, scaling=True, **labels)
    nuts = params.get("nuts", {"num_warmup": 30, "num_samples": 30, "max_tree_depth": 5})
    for backend in perf_backends():
        grads, compiles = [], []
        for _ in range(params["repeats"]):
            options = backend_options(get_method("nuts", backend), backend, nuts)
            result = fit(model, "nuts", backend=backend, seed=0, **options)
            grads.append(result.timings["sampling"] / max(1, result.sample_stats["n_steps"].sum()))
            compiles.append(result.timings["compile"])
        mode = result.info.get("pyro_mode", "")
        rows.append(row("nuts_grad_s", grads, backend=backend, variant=mode or "nuts", **labels))
        rows.append(
            row("compile_s", compiles, backend=backend, variant=f"nuts {mode}".strip(), **labels)
        )
    return rows


def throughput(probe: Probe, data_dir: str | None) -> list[dict[str, Any]]:
    """Wall time of the same CPU-bound cells (half NUTS on a backend whose programs persist in
    a compilation cache, half SVI on another backend: :func:`throughput_backends`; the sine
    set, options ``svi`` and ``nuts``) run with ``--jobs 1`` and with ``--jobs 2``.

    Each pair of sweeps runs once per entry of ``caches``: ``"warm"`` shares a JAX persistent
    compilation cache filled beforehand, as ``ppl-bnn bench`` runs cells, so the NUTS cells
    load their programs instead of compiling them; ``"none"`` uses no cache, so every NUTS
    cell compiles, and XLA's compiler works on more than one core while it does, which a cell
    that shares the cores cannot. Beside each sweep's wall time, the cells' own wall times
    summed (their ratio between the two sweeps is how much a cell slows down when another runs
    beside it) and their JAX cache hits summed.
    """
    half = max(1, probe.params["cells"] // 2)
    nuts_on, svi_on = throughput_backends()
    exclude = [] if nuts_on == svi_on else [f"svi.{nuts_on}", f"nuts.{svi_on}"]
    raw = {
        "name": "throughput",
        "seeds": list(range(half)),
        "backends": [b for b in perf_backends() if b in (nuts_on, svi_on)],
        "model": {"hidden": [20, 20], "activation": "tanh"},
        "datasets": [{"name": "sine", "exclude": exclude}],
        "methods": {
            "svi": probe.params.get("svi", {"num_steps": 2000, "num_draws": 200}),
            "nuts": probe.params.get(
                "nuts", {"num_warmup": 300, "num_samples": 300, "max_tree_depth": 6}
            ),
        },
    }
    suite = parse_suite(raw, where="throughput probe")
    labels = {"cells": len(suite.cells()), "backend": ""}
    rows = []
    with tempfile.TemporaryDirectory() as cache_dir:
        for cache in probe.params.get("caches", THROUGHPUT_CACHES):
            jax_cache = None
            if cache == "warm":
                jax_cache = cache_dir
                _fill_jax_cache(suite, cache_dir)
            rows += [
                row(
                    q,
                    values[jobs],
                    unit="" if q == "jax_cache_hits" else "s",
                    variant=f"jobs{jobs}",
                    cache=cache,
                    **labels,
                )
                for q, values in _sweeps(suite, probe.params["repeats"], jax_cache).items()
                for jobs in (1, 2)
            ]
    return rows


def throughput_backends() -> tuple[str, str]:
    """The throughput probe's ``(NUTS backend, SVI backend)``: the first backend whose programs
    persist in a compilation cache (else the first), and the first other one (else the same)."""
    backends = perf_backends()
    nuts_on = (cached_backends() or backends)[0]
    return nuts_on, next((b for b in backends if b != nuts_on), nuts_on)


def _fill_jax_cache(suite: Suite, cache_dir: str) -> None:
    """Compile the cached backends' programs into ``cache_dir`` with one and with two cells at
    once: the thread count per cell enters XLA's flags, which are part of the cache key."""
    only = {"backend": set(cached_backends()), "seed": {suite.seeds[0]}}
    for jobs in (1, 2):
        with tempfile.TemporaryDirectory() as tmp:
            summary = _new_sweep(suite, Path(tmp), jobs=jobs, only=only, jax_cache=cache_dir)
        _require_ok(summary, f"throughput probe, filling the JAX cache with --jobs {jobs}")


def _new_sweep(suite: Suite, results: Path, **kwargs: Any) -> SweepSummary:
    """:func:`~ppl_bnn.bench.runner.run_suite` in new worker processes, as a new ``ppl-bnn
    bench`` runs it: no worker of an earlier sweep of this probe, with its compiled programs
    in memory, is reused."""
    pool.shutdown()
    try:
        return run_suite(suite, results, **kwargs)
    finally:
        pool.shutdown()


def _require_ok(summary: SweepSummary, what: str) -> None:
    if not summary.ok:
        raise RuntimeError(f"{what}: cells failed: {summary.failed_cells}")


def _sweeps(suite: Suite, repeats: int, jax_cache: str | None) -> dict[str, dict[int, list[float]]]:
    """Per quantity and ``--jobs`` (1, 2), one value per repeat: the sweep's wall time
    (``sweep_wall_s``), its cells' wall times summed (``cell_time_s``) and their JAX cache hits
    summed (``jax_cache_hits``)."""
    out: dict[str, dict[int, list[float]]] = {
        q: {1: [], 2: []} for q in ("sweep_wall_s", "cell_time_s", "jax_cache_hits")
    }
    for _ in range(repeats):
        for jobs in (1, 2):
            with tempfile.TemporaryDirectory() as tmp:
                summary = _new_sweep(suite, Path(tmp), jobs=jobs, jax_cache=jax_cache)
                records = read_records(Path(tmp))
            _require_ok(summary, f"throughput probe, --jobs {jobs}")
            out["sweep_wall_s"][jobs].append(summary.wall_s)
            out["cell_time_s"][jobs].append(sum(r["timings"]["cell_wall"] for r in records))
            out["jax_cache_hits"][jobs].append(
                sum(r.get("compilation", {}).get("jax_cache_hits", 0) for r in records)
            )
    return out


def compile_cache(probe: Probe, data_dir: str | None) -> list[dict[str, Any]]:
    """The same fit in two new processes that share an empty JAX persistent cache, as
    ``ppl-bnn bench`` runs cells: the first compiles every program and fills the cache
    (``cold``), the second loads them (``warm``).

    One empty cache per method (``methods``: name -> options) and repeat, so that no method
    loads another's programs. Per process: the fit's compile time (``compile_s``: tracing,
    lowering and compiling or loading), its whole time (``fit_s``), and its XLA compilations
    (``xla_compiles``) and cache hits (``jax_cache_hits``).
    """
    params = probe.params
    limits = {"max_train": params["max_train"]} if params.get("max_train") else {}
    raw = {
        "name": "compile_cache",
        "seeds": [0],
        "backends": [probe.backend],
        "model": params.get("model", {}),
        "datasets": [{"name": params["dataset"], **limits}],
        "methods": params["methods"],
    }
    suite = parse_suite(raw, where="compile_cache probe")
    quantities = {
        "compile_s": lambda r: r["timings"]["compile"],
        "fit_s": lambda r: r["timings"]["total"],
        "xla_compiles": lambda r: r["info"]["jax_cache"]["compiles"],
        "jax_cache_hits": lambda r: r["info"]["jax_cache"]["cache_hits"],
    }
    values: dict[tuple[str, str, str], list[float]] = {}
    for _ in range(params["repeats"]):
        for method in params["methods"]:
            with tempfile.TemporaryDirectory() as cache_dir:
                for variant in ("cold", "warm"):
                    with tempfile.TemporaryDirectory() as tmp:
                        summary = _new_sweep(
                            suite,
                            Path(tmp),
                            jobs=1,
                            data_dir=data_dir,
                            only={"method": {method}},
                            jax_cache=cache_dir,
                        )
                        (record,) = read_records(Path(tmp))
                    _require_ok(summary, f"compile_cache probe, {method} with a {variant} cache")
                    for quantity, value in quantities.items():
                        values.setdefault((quantity, method, variant), []).append(value(record))
    return [
        row(
            quantity,
            vals,
            unit="s" if quantity.endswith("_s") else "",
            problem=params["problem"],
            method=method,
            backend=probe.backend,
            variant=variant,
        )
        for (quantity, method, variant), vals in values.items()
    ]


def conv(probe: Probe, data_dir: str | None) -> list[dict[str, Any]]:
    """A Bayesian LeNet-5 (:func:`~ppl_bnn.bench.lenet.lenet5`) fitted by mean-field SVI with
    ``options`` (default: Flipout, minibatches of ``batch_size``) on one backend, against that
    framework's plain LeNet-5 training step (:meth:`ppl_bnn.engine.perf.Perf.plain_step`) on the
    same images.

    Rows: seconds per step (``step_s``, variant ``plain`` or the estimator) and the compile
    time apart (``compile_s``: JAX's compilation; for torch the first step), and the ratio of
    the Bayesian to the plain step within each repeat (``step_ratio``); the images are
    MNIST's when the data directory has them, else synthetic ones of the same shape (label
    ``problem``: ``lenet5-mnist`` / ``lenet5-synthetic``).
    """
    params = probe.params
    backend, batch, repeats = params["backend"], params["batch_size"], params["repeats"]
    x, y, source = lenet.mnist_images(params["images"], data_dir, size=params["image_size"])
    size = params["image_size"]
    labels = {
        "problem": f"lenet5-{source}-{size}x{size}",
        "backend": backend,
        "batch_size": batch,
    }
    plain_run, plain_compile = perf_module(backend).plain_step(
        x, y, batch_size=batch, steps=params["plain_steps"]
    )
    model = BNN(
        x,
        y,
        layers=lenet.lenet5(),
        likelihood="categorical",
        num_classes=10,
        prior=lenet.PRIORS[params["prior"]],
    )
    options = {"estimator": "flipout", "num_draws": 10, **params.get("options", {})}
    options.update(batch_size=batch, num_steps=params["steps"])
    # Plain and Bayesian runs alternate, so that load from outside falls on both alike.
    plain, steps, compiles = [], [], []
    for _ in range(repeats):
        plain.append(plain_run())
        result = fit(model, "svi", backend=backend, seed=0, **options)
        steps.append(lenet.own_steps_seconds(result) / options["num_steps"])
        compiles.append(result.timings["compile"])
    variant = options["estimator"]
    return [
        row("step_s", plain, variant="plain", **labels),
        row("compile_s", [plain_compile], variant="plain", **labels),
        row("step_s", steps, variant=variant, **labels),
        row("compile_s", compiles, variant=variant, **labels),
        row("step_ratio", np.divide(steps, plain), unit="", variant=variant, **labels),
    ]


PROBES: dict[str, Callable[[Probe, str | None], list[dict[str, Any]]]] = {
    "floor": floor,
    "method": method,
    "overhead": overhead,
    "predict": predict,
    "scaling": scaling,
    "throughput": throughput,
    "compile_cache": compile_cache,
    "conv": conv,
}


def run_probe(probe: Probe, data_dir: str | None = None) -> list[dict[str, Any]]:
    """The rows of ``probe``'s measurement."""
    return PROBES[probe.kind](probe, data_dir)
