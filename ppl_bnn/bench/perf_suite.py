"""Performance suites: TOML files (``kind = "perf"``) that expand into probes.

A probe measures cost instead of fitting for quality. It runs in its own process like a cell
(same timeout, staging, atomic record and resume), but the runner runs probes one at a time on
an otherwise idle machine, so that no probe's timing is disturbed by another::

    name = "perf"
    kind = "perf"
    repeats = 3                 # every timing is repeated; min and median are reported
    timeout_s = 600

    [problems.sine]             # a model bound to a dataset
    dataset = "sine"
    model = { hidden = [20, 20], activation = "tanh" }

    [floor]                     # bare gradients and the kernels' cost, per problem
    problems = ["sine"]
    torch_calls = 500           # <framework>_calls: a backend's gradient calls per repeat
    jax_calls = 5000
    kernel_draws = 100
    # torch_variants = ["bare_eager", "pyro_traced"]   # <framework>_variants: the gradients
    #                           # timed (default: all of its perf module's GRADIENT_VARIANTS)

    [[methods]]                 # cost of one (method, backend[, variant]) through ``fit``
    problem = "sine"
    method = "nuts"
    backend = "pyro"
    variant = "pyro_jit"        # a label; defaults to the backend's default path
    options = { potential = "pyro_jit", num_warmup = 50, num_samples = 50 }

    [overhead]                  # fit vs the PPL called directly (backends with direct calls)
    problem = "sine"
    nuts = { num_warmup = 200, num_samples = 200 }
    svi = { num_steps = 3000 }

    [predict]                   # draws x points through FitResult.predict
    problem = "diabetes"
    draws = 1000
    points = 10000

    [scaling]                   # growth with data size and width
    n = [500, 5000, 50000]
    width = [10, 50, 200]
    base_n = 500
    base_width = 50

    [throughput]                # cells per second with --jobs 1 and --jobs 2
    cells = 4
    caches = ["warm", "none"]   # a JAX cache filled beforehand (as the bench runs) / none

    [conv]                      # LeNet-5 SVI (Flipout) vs a plain LeNet-5 step, per backend
    backends = ["numpyro", "pyro"]   # default: every backend with a perf module
    images = 10000              # MNIST training images (synthetic 28x28x1 ones when absent)
    image_size = 28             # another size: synthetic images (for tests)
    batch_size = 128
    steps = 50                  # SVI steps per fit; plain_steps: plain training steps
    prior = "scale_mixture"     # or "normal"
    options = { estimator = "flipout" }   # more svi options (not batch_size / num_steps)

    [compile_cache]             # a fit in two new processes sharing an empty compilation cache
    problem = "sine"
    methods = { svi = { num_steps = 3000 }, nuts = { num_warmup = 300 } }   # name -> options
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ppl_bnn.bench.cell import PROBE_KINDS, Probe
from ppl_bnn.bench.schema import (
    SuiteError,
    check_int,
    check_keys,
    check_model,
    check_name,
    check_options,
    check_selection,
    check_timeout,
)
from ppl_bnn.data import dataset_names
from ppl_bnn.engine.perf import Perf
from ppl_bnn.engine.registry import backend_names, declaration, get_module

#: Where ``fit``'s SVI starts in the overhead probe: as NumPyro's ``AutoNormal`` does (uniform in
#: unconstrained space), not from ``svi``'s default MAP warm start, which the direct call it is
#: compared with does not run.
OVERHEAD_SVI_START = "uniform"

# The JAX caches the throughput probe runs its cells with: filled beforehand, or none.
THROUGHPUT_CACHES = ("warm", "none")

_KEYS = {"name", "kind", "description", "repeats", "timeout_s", "problems", *PROBE_KINDS}
_KEYS = (_KEYS - {"method"}) | {"methods"}

# The [conv] table's keys and defaults (LeNet-5 SVI vs a plain LeNet-5 step; backends: every
# backend with a perf module).
CONV_DEFAULTS: dict[str, Any] = {
    "backends": None,
    "images": 10_000,
    "image_size": 28,
    "batch_size": 128,
    "steps": 50,
    "plain_steps": 50,
    "prior": "scale_mixture",
    "options": {},
}
# Options the [conv] table sets itself, so they cannot be given in its options.
_CONV_OWN = ("batch_size", "num_steps")


def perf_backends() -> tuple[str, ...]:
    """The registered backends with a ``perf`` module (:class:`~ppl_bnn.engine.perf.Perf`),
    in registry order; nothing is imported."""
    return tuple(b for b in backend_names() if "perf" in declaration(b).modules)


def perf_module(backend: str) -> Perf:
    """Backend ``backend``'s ``perf`` module (it imports no framework until called)."""
    return get_module(backend, "perf")


def framework_key(backend: str, setting: str) -> str:
    """A suite's key for one backend's setting, by its framework: ``torch_calls``."""
    return f"{declaration(backend).framework.lower()}_{setting}"


def direct_backends() -> tuple[str, ...]:
    """The backends whose PPL the overhead probe calls directly."""
    return tuple(b for b in perf_backends() if perf_module(b).DIRECT_METHODS)


def cached_backends() -> tuple[str, ...]:
    """The backends whose compiled programs persist across processes."""
    return tuple(b for b in perf_backends() if perf_module(b).PERSISTENT_CACHE)


def _gradient_keys() -> dict[str, tuple[str, ...]]:
    """``{<framework>_calls: (), <framework>_variants: the variants}`` of every perf backend:
    the keys the [floor] and [scaling] tables take for each."""
    out: dict[str, tuple[str, ...]] = {}
    for backend in perf_backends():
        out[framework_key(backend, "calls")] = ()
        out[framework_key(backend, "variants")] = tuple(perf_module(backend).GRADIENT_VARIANTS)
    return out


def _check_gradient_settings(where: str, settings: Mapping[str, Any]) -> None:
    """Each ``<framework>_variants`` given drawn from its backend's variants."""
    for key, variants in _gradient_keys().items():
        if variants:
            _check_choices(where, settings, key, variants)


@dataclass(frozen=True)
class PerfSuite:
    """A parsed performance suite; :meth:`cells` lists its probes in run order."""

    name: str
    description: str
    probes: tuple[Probe, ...]
    kind: str = "perf"
    # What a fit suite has and a performance suite does not: a reference posterior, margins
    # for its verdicts, seeds added until they are decided.
    reference: None = None
    margins: None = None
    auto_seeds: None = None
    all_seeds: None = None

    def cells(
        self,
        *,
        max_splits: int | None = None,
        data_dir: object = None,
        only: Mapping[str, set[str]] | None = None,
        seeds: object = None,
    ) -> list[Probe]:
        """The probes (``max_splits``, ``data_dir`` and ``seeds`` do not apply); ``only`` filters by
        dataset, method (a probe kind or a method name) and backend; a value no probe has
        raises :class:`SuiteError`."""
        check_selection(self.name, only, self.selectable())
        out = list(self.probes)
        if only:
            out = [p for p in out if all(getattr(p, k) in v for k, v in only.items() if v)]
        return out

    def selectable(self) -> dict[str, set[str]]:
        """What ``only`` may name: the probes' datasets, methods and backends."""
        keys = ("dataset", "method", "backend")
        return {k: {v for p in self.probes if (v := getattr(p, k))} for k in keys}


def _problem(where: str, problems: Mapping[str, Any], name: str) -> dict[str, Any]:
    if name not in problems:
        raise SuiteError(f"{where}: unknown problem {name!r}; defined: {sorted(problems)}")
    return dict(problems[name])


def _check_choices(
    where: str, settings: Mapping[str, Any], key: str, allowed: tuple[str, ...]
) -> None:
    """``settings[key]``, when given, must be a non-empty list drawn from ``allowed``."""
    chosen = settings.get(key, allowed)
    if not (isinstance(chosen, (list, tuple)) and chosen and set(chosen) <= set(allowed)):
        raise SuiteError(
            f"{where}: {key} must be a non-empty list drawn from {', '.join(allowed)}; "
            f"got {chosen!r}"
        )


#: One probe as a section makes it: its name, its kind, its parameters and its budget note.
ProbeEntry = tuple[str, str, dict[str, Any], str | None]
#: The problems of a suite by name (``[problems.*]``).
Problems = Mapping[str, dict[str, Any]]


def parse_perf_suite(raw: Mapping[str, Any], *, where: str = "suite") -> PerfSuite:
    """Validate a performance suite given as the parsed TOML."""
    check_keys(where, raw, _KEYS)
    if "name" not in raw:
        raise SuiteError(f"{where}: missing required key 'name'")
    name = check_name(where, raw["name"])
    repeats = raw.get("repeats", 3)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise SuiteError(f"{where}: repeats must be an integer >= 1, got {repeats!r}")
    timeout = check_timeout(where, raw)
    problems = _problems(where, raw)
    probes = []
    for section in _SECTIONS:
        for probe, kind, params, note in section(where, raw, problems):
            params = {**params, "repeats": params.get("repeats", repeats)}
            given = params["repeats"]
            if isinstance(given, bool) or not isinstance(given, int) or given < 1:
                raise SuiteError(f"{where}: {probe}: repeats must be an integer >= 1")
            probes.append(Probe(raw["name"], probe, kind, params, timeout, note))
    if not probes:
        raise SuiteError(f"{where}: a performance suite needs at least one probe")
    return PerfSuite(name=name, description=str(raw.get("description", "")), probes=tuple(probes))


def _problems(where: str, raw: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``[problems.*]`` tables, checked: a known dataset, a model, a training subset."""
    problems = {k: dict(v) for k, v in raw.get("problems", {}).items()}
    for key, problem in problems.items():
        check_keys(f"{where} [problems.{key}]", problem, {"dataset", "model", "max_train"})
        if problem.get("dataset") not in dataset_names():
            raise SuiteError(
                f"{where} [problems.{key}]: unknown dataset {problem.get('dataset')!r}"
            )
        check_model(f"{where} [problems.{key}] model", problem.get("model", {}))
        if problem.get("max_train") is not None:
            check_int(f"{where} [problems.{key}]", problem, "max_train", 0, minimum=1)
    return problems


def _floor_probes(where: str, raw: Mapping[str, Any], problems: Problems) -> list[ProbeEntry]:
    """``[floor]``: the bare gradients' and the kernels' floors, one probe per problem."""
    floor = raw.get("floor")
    if floor is None:
        return []
    keys = {"problems", "kernel_draws", "repeats", *_gradient_keys()}
    check_keys(f"{where} [floor]", floor, keys)
    settings = {k: v for k, v in floor.items() if k != "problems"}
    _check_gradient_settings(f"{where} [floor]", settings)
    out = []
    for key in floor.get("problems", []):
        problem = _problem(f"{where} [floor]", problems, key)
        out.append((f"floor-{key}", "floor", {"problem": key, **problem, **settings}, None))
    return out


def _method_probes(where: str, raw: Mapping[str, Any], problems: Problems) -> list[ProbeEntry]:
    """``[[methods]]``: one probe per (problem, method, backend, variant)."""
    out = []
    for i, entry in enumerate(raw.get("methods", [])):
        loc = f"{where} [[methods]] #{i + 1}"
        check_keys(
            loc,
            entry,
            {"problem", "method", "backend", "variant", "options", "budget_note", "repeats"},
        )
        problem = _problem(loc, problems, entry.get("problem", ""))
        options = dict(entry.get("options", {}))
        check_options(loc, entry.get("method", ""), entry.get("backend", ""), options)
        variant = entry.get("variant", "default")
        params = {
            "problem": entry["problem"],
            **problem,
            "method": entry["method"],
            "backend": entry["backend"],
            "variant": variant,
            "options": options,
            **({"repeats": entry["repeats"]} if "repeats" in entry else {}),
        }
        label = f"{entry['problem']}-{entry['method']}-{entry['backend']}-{variant}"
        out.append((f"method-{label}", "method", params, entry.get("budget_note")))
    return out


def _overhead_probes(where: str, raw: Mapping[str, Any], problems: Problems) -> list[ProbeEntry]:
    """``[overhead]``: ``fit`` against the PPL called directly, on one problem, one probe per
    backend with direct calls."""
    overhead = raw.get("overhead")
    if overhead is None:
        return []
    check_keys(f"{where} [overhead]", overhead, {"problem", "nuts", "svi", "repeats"})
    problem = _problem(f"{where} [overhead]", problems, overhead.get("problem", ""))
    settings = {k: dict(overhead.get(k, {})) for k in ("nuts", "svi")}
    start = settings["svi"].setdefault("init_loc", OVERHEAD_SVI_START)
    if start != OVERHEAD_SVI_START:
        raise SuiteError(
            f"{where} [overhead] svi: init_loc must be {OVERHEAD_SVI_START!r}, the start of "
            f"the PPL's own SVI that fit's is compared with; got {start!r}"
        )
    settings.update({k: overhead[k] for k in ("repeats",) if k in overhead})
    key = overhead["problem"]
    return [
        (f"overhead-{key}-{b}", "overhead", {"problem": key, **problem, **settings, "backend": b},
         None)
        for b in direct_backends()
    ]  # fmt: skip


def _predict_probes(where: str, raw: Mapping[str, Any], problems: Problems) -> list[ProbeEntry]:
    """``[predict]``: ``FitResult.predict`` of many draws at many points."""
    predict = raw.get("predict")
    if predict is None:
        return []
    check_keys(f"{where} [predict]", predict, {"problem", "draws", "points", "repeats"})
    problem = _problem(f"{where} [predict]", problems, predict.get("problem", ""))
    settings = {k: int(predict.get(k, d)) for k, d in (("draws", 1000), ("points", 10000))}
    settings.update({k: predict[k] for k in ("repeats",) if k in predict})
    return [("predict", "predict", {"problem": predict["problem"], **problem, **settings}, None)]


def _scaling_probes(where: str, raw: Mapping[str, Any], problems: Problems) -> list[ProbeEntry]:
    """``[scaling]``: gradient floors over data sizes at the base width and over widths at
    the base size."""
    scaling = raw.get("scaling")
    if scaling is None:
        return []
    passed = ("input_dim", "nuts", "repeats", *_gradient_keys())
    check_keys(f"{where} [scaling]", scaling, {"n", "width", "base_n", "base_width", *passed})
    base_n, base_width = int(scaling.get("base_n", 500)), int(scaling.get("base_width", 50))
    grid = [(n, base_width) for n in scaling.get("n", [])]
    grid += [(base_n, w) for w in scaling.get("width", []) if (base_n, w) not in grid]
    settings = {k: scaling[k] for k in passed if k in scaling}
    _check_gradient_settings(f"{where} [scaling]", settings)
    return [
        (f"scaling-n{n}-width{width}", "scaling", {"n": n, "width": width, **settings}, None)
        for n, width in grid
    ]


def _throughput_probes(where: str, raw: Mapping[str, Any], problems: Problems) -> list[ProbeEntry]:
    """``[throughput]``: the same cells at one and two jobs, with and without a JAX cache."""
    throughput = raw.get("throughput")
    if throughput is None:
        return []
    keys = ("repeats", "svi", "nuts", "caches")
    check_keys(f"{where} [throughput]", throughput, {"cells", *keys})
    settings = {k: throughput[k] for k in keys if k in throughput}
    _check_choices(f"{where} [throughput]", settings, "caches", THROUGHPUT_CACHES)
    params = {"cells": int(throughput.get("cells", 4)), **settings}
    return [("throughput", "throughput", params, None)]


def _compile_cache_probes(
    where: str, raw: Mapping[str, Any], problems: Problems
) -> list[ProbeEntry]:
    """``[compile_cache]``: fits in new processes sharing an empty compilation cache, one probe
    per backend whose compiled programs persist."""
    cache = raw.get("compile_cache")
    if cache is None:
        return []
    loc = f"{where} [compile_cache]"
    check_keys(loc, cache, {"problem", "methods", "repeats"})
    problem = _problem(loc, problems, cache.get("problem", ""))
    methods = cache.get("methods")
    if not (isinstance(methods, Mapping) and methods):
        raise SuiteError(
            f"{loc}: methods must map method names to their options, e.g. "
            f"methods = {{ svi = {{ num_steps = 3000 }} }}; got {methods!r}"
        )
    out = []
    for backend in cached_backends():
        for method, options in methods.items():
            if not isinstance(options, Mapping):
                raise SuiteError(f"{loc}: methods.{method} must be a table of options")
            check_options(f"{loc} methods.{method}", method, backend, dict(options))
        params = {
            "problem": cache["problem"],
            **problem,
            "backend": backend,
            "methods": {method: dict(options) for method, options in methods.items()},
            **({"repeats": cache["repeats"]} if "repeats" in cache else {}),
        }
        out.append((f"compile-cache-{cache['problem']}-{backend}", "compile_cache", params, None))
    return out


def _conv_section(where: str, raw: Mapping[str, Any], problems: Problems) -> list[ProbeEntry]:
    """``[conv]``: a LeNet-5 step, Bayesian against plain, one probe per backend."""
    conv = raw.get("conv")
    if conv is None:
        return []
    return [
        (f"conv-lenet5-{backend}", "conv", params, None)
        for backend, params in _conv_probes(f"{where} [conv]", conv).items()
    ]


#: A suite's probes, section by section, in the order they run.
_SECTIONS: tuple[Callable[[str, Mapping[str, Any], Problems], list[ProbeEntry]], ...] = (
    _floor_probes,
    _method_probes,
    _overhead_probes,
    _predict_probes,
    _scaling_probes,
    _throughput_probes,
    _compile_cache_probes,
    _conv_section,
)


def _conv_probes(where: str, conv: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The checked ``[conv]`` table as one probe's parameters per backend."""
    from ppl_bnn.bench.lenet import PRIORS

    check_keys(where, conv, {*CONV_DEFAULTS, "repeats"})
    settings = {**CONV_DEFAULTS, "backends": list(perf_backends()), **conv}
    _check_choices(where, settings, "backends", perf_backends())
    for key in ("images", "image_size", "batch_size", "steps", "plain_steps"):
        check_int(where, settings, key, CONV_DEFAULTS[key], minimum=1)
    if settings["batch_size"] > settings["images"]:
        raise SuiteError(
            f"{where}: batch_size ({settings['batch_size']}) must not exceed images "
            f"({settings['images']})"
        )
    if settings["image_size"] % 4:
        raise SuiteError(
            f"{where}: image_size must be a multiple of 4 (LeNet-5 pools twice), got "
            f"{settings['image_size']}"
        )
    if settings["prior"] not in PRIORS:
        raise SuiteError(
            f"{where}: unknown prior {settings['prior']!r}; allowed: {', '.join(PRIORS)}"
        )
    options = settings["options"]
    if not isinstance(options, Mapping):
        raise SuiteError(f"{where}: options must be a table of svi options, got {options!r}")
    own = sorted(set(options) & set(_CONV_OWN))
    if own:
        raise SuiteError(f"{where}: options {own} are set by the table itself; remove them")
    probes = {}
    for backend in settings["backends"]:
        full = {"estimator": "flipout", **options, "batch_size": settings["batch_size"]}
        check_options(f"{where} options", "svi", backend, full)
        params = {k: v for k, v in settings.items() if k != "backends"}
        probes[backend] = {**params, "options": dict(options), "backend": backend}
    return probes
