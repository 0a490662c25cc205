"""The performance report: a performance suite's probes as tables, ratios and figures.

Every number comes from the probes' stored rows (``record.json``, key ``perf``), and every ratio
is formed from two rows of the same run. Costs per gradient and per step are medians over a
probe's repeats (the tables show min and median); the overhead of ``fit`` compares the fastest
repeat of each call.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure

from ppl_bnn.bench.lenet import MNIST_TRAIN
from ppl_bnn.report import fmt
from ppl_bnn.report.build import environment_section
from ppl_bnn.report.document import BulletList, Details, Document, Figure, Paragraph, Section, Table
from ppl_bnn.report.figures import _png, plain_log_ticks
from ppl_bnn.report.load import SuiteResults
from ppl_bnn.report.style import backend_marker, method_color

#: The goal for the conv probe: a Bayesian LeNet-5 step at most this many plain steps.
CONV_GOAL = 3.0

LABELS = ("problem", "method", "backend", "variant", "mode", "threads", "n", "width", "cache")


def rows_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per measured quantity of every successful probe."""
    rows = []
    for record in records:
        for entry in record.get("perf") or []:
            rows.append(
                {"probe": record["cell_id"], "budget_note": record.get("budget_note"), **entry}
            )
    frame = pd.DataFrame(rows)
    for column in (*LABELS, "budget_note"):
        values = frame[column] if column in frame else pd.Series(index=frame.index, dtype=object)
        frame[column] = values.astype(object).where(values.notna(), "")
    return frame


def _value(frame: pd.DataFrame, quantity: str, stat: str = "median", **labels: Any) -> float:
    """The ``stat`` of the one row matching ``quantity`` and ``labels``, or NaN."""
    if frame.empty:
        return math.nan
    mask = frame["quantity"] == quantity
    for key, value in labels.items():
        mask &= frame[key].astype(str) == str(value)
    hits = frame[mask]
    return float(hits[stat].iloc[0]) if len(hits) == 1 else math.nan


def _ratio(a: float, b: float) -> float:
    return a / b if b and math.isfinite(a) and math.isfinite(b) else math.nan


def floors(frame: pd.DataFrame, problem: str) -> dict[str, float]:
    """Each backend's floor per gradient on ``problem`` (seconds, medians over repeats).

    ``jax``: a bare jitted gradient inside a compiled loop. ``torch_bare``: the cheapest
    hand-written torch gradient (eager or traced). ``torch_any``: the cheapest torch gradient of
    any kind, the compiled Pyro potential included. ``pyro_nuts``: Pyro's NUTS kernel per step on a
    nearly free potential plus ``torch_bare``; ``pyro_nuts_strict``: the same plus ``torch_any``.
    """
    grads = frame[(frame["quantity"] == "grad_s") & (frame["problem"] == problem)]
    torch = grads[grads["backend"] == "pyro"]
    bare = torch[torch["variant"].astype(str).str.startswith("bare")]
    kernel = _value(frame, "kernel_s_per_step", problem=problem, variant="nuts")
    out = {
        "jax": _value(frame, "grad_s", problem=problem, variant="bare_jit"),
        "torch_bare": float(bare["median"].min()) if len(bare) else math.nan,
        "torch_any": float(torch["median"].min()) if len(torch) else math.nan,
        "kernel": kernel,
    }
    out["pyro_nuts"] = kernel + out["torch_bare"]
    out["pyro_nuts_strict"] = kernel + out["torch_any"]
    return out


def headline(frame: pd.DataFrame, problem: str = "sine") -> list[tuple[str, float, str]]:
    """``(what, ratio, how it is formed)`` for the ratios the report quotes."""
    return [
        *_sampler_ratios(frame, problem),
        *_optimiser_ratios(frame, problem),
        *_overhead_ratios(frame, problem),
        *_throughput_ratios(frame),
        *compile_cache_ratios(frame),
    ]


def _per(
    frame: pd.DataFrame, problem: str, method: str, backend: str, variant: str,
    quantity: str = "grad_s",
) -> float:  # fmt: skip
    """The median ``quantity`` of one (method, backend, variant) on ``problem``."""
    return _value(frame, quantity, problem=problem, method=method, backend=backend, variant=variant)


def _sampler_ratios(frame: pd.DataFrame, problem: str) -> list[tuple[str, float, str]]:
    """NUTS: Pyro's paths against the compiled potential, the floors and NumPyro."""
    f = floors(frame, problem)
    pyro_nuts = {
        v: _per(frame, problem, "nuts", "pyro", v) for v in ("compiled", "pyro_jit", "pyro")
    }
    numpyro_nuts = _per(frame, problem, "nuts", "numpyro", "default")
    return [
        (
            "Pyro NUTS per gradient, Pyro's default path / compiled flat potential",
            _ratio(pyro_nuts["pyro"], pyro_nuts["compiled"]),
            "speed-up",
        ),
        (
            "Pyro NUTS per gradient, Pyro's jit_compile / compiled flat potential",
            _ratio(pyro_nuts["pyro_jit"], pyro_nuts["compiled"]),
            "speed-up",
        ),
        (
            "Pyro NUTS (compiled) per gradient / floor (kernel + cheapest bare torch gradient)",
            _ratio(pyro_nuts["compiled"], f["pyro_nuts"]),
            "target <= 1.1",
        ),
        (
            "Pyro NUTS (compiled) per gradient / strict floor "
            "(kernel + cheapest torch gradient of any kind)",
            _ratio(pyro_nuts["compiled"], f["pyro_nuts_strict"]),
            "target <= 1.1",
        ),
        (
            "NumPyro NUTS per gradient / bare jitted JAX gradient",
            _ratio(numpyro_nuts, f["jax"]),
            "overhead of the sampler",
        ),
        (
            "Pyro NUTS (compiled) / NumPyro NUTS, per gradient",
            _ratio(pyro_nuts["compiled"], numpyro_nuts),
            "cost ratio",
        ),
        (
            "Pyro NUTS (compiled) / NumPyro NUTS, per effective sample",
            _ratio(
                _per(frame, problem, "nuts", "pyro", "compiled", "s_per_ess"),
                _per(frame, problem, "nuts", "numpyro", "default", "s_per_ess"),
            ),
            "cost ratio",
        ),
    ]


def _optimiser_ratios(frame: pd.DataFrame, problem: str) -> list[tuple[str, float, str]]:
    """Pyro's SVI paths against the fused step, and Pyro against NumPyro for SVI and SGLD."""
    pyro_svi = {
        v: _per(frame, problem, "svi", "pyro", v, "step_s") for v in ("fused", "jit", "eager")
    }
    return [
        (
            "Pyro SVI per step, Pyro's default (Trace_ELBO, SVI.step) / fused "
            "(JitTrace_ELBO, one Adam)",
            _ratio(pyro_svi["eager"], pyro_svi["fused"]),
            "speed-up, target >= 2",
        ),
        (
            "Pyro SVI per step, Pyro's default / JitTrace_ELBO with SVI.step",
            _ratio(pyro_svi["eager"], pyro_svi["jit"]),
            "speed-up",
        ),
        (
            "Pyro SVI (fused) / NumPyro SVI, per step",
            _ratio(pyro_svi["fused"], _per(frame, problem, "svi", "numpyro", "default", "step_s")),
            "cost ratio",
        ),
        (
            "Pyro SGLD / NumPyro SGLD, per step",
            _ratio(
                _per(frame, problem, "sgld", "pyro", "default", "step_s"),
                _per(frame, problem, "sgld", "numpyro", "default", "step_s"),
            ),
            "cost ratio",
        ),
    ]


def _overhead_ratios(frame: pd.DataFrame, problem: str) -> list[tuple[str, float, str]]:
    """``fit`` against NumPyro called directly, for NUTS and SVI."""
    out = []
    for algorithm in ("nuts", "svi"):
        fit_s = _value(frame, "call_s", "min", problem=problem, method=algorithm, variant="fit")
        direct = _value(frame, "call_s", "min", problem=problem, method=algorithm, variant="direct")
        out.append(
            (
                f"NumPyro {algorithm.upper()}: fit / the library called directly (fastest repeats)",
                _ratio(fit_s, direct),
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
            return _value(frame, quantity, "min", variant=f"jobs{jobs}", cache=cache)

        out.append(
            (
                f"Cell throughput, --jobs 2 / --jobs 1 ({what})",
                _ratio(sweeps("sweep_wall_s", 1), sweeps("sweep_wall_s", 2)),
                "target >= 1.7" if cache == "warm" else "throughput",
            )
        )
        out.append(
            (
                f"Summed cell wall times, --jobs 2 / --jobs 1 ({what})",
                _ratio(sweeps("cell_time_s", 2), sweeps("cell_time_s", 1)),
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
    for method in warm["method"].drop_duplicates():
        cold_s, warm_s = (
            _value(frame, "compile_s", method=method, backend="numpyro", variant=v)
            for v in ("cold", "warm")
        )
        out.append(
            (
                f"NumPyro {str(method).upper()} compile time in a new process, empty JAX cache / "
                "cache filled by the same fit in another process",
                _ratio(cold_s, warm_s),
                f"speed-up; {_seconds(warm_s)} with the cache (should be seconds)",
            )
        )
    return out


def _seconds(value: float) -> str:
    """A duration with a unit that keeps 3 significant digits readable."""
    if not math.isfinite(value):
        return ""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("\u00b5s", 1e-6)):
        if abs(value) >= scale:
            return f"{fmt.number(value / scale)} {unit}"
    return f"{fmt.number(value / 1e-9)} ns"


def _label(value: object) -> str:
    """A label cell: whole numbers without a decimal point, missing as blank."""
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else fmt.number(value)
    return str(value)


def _min_median(frame: pd.DataFrame, quantity: str, labels: dict[str, Any]) -> str:
    mn = _value(frame, quantity, "min", **labels)
    md = _value(frame, quantity, "median", **labels)
    if not math.isfinite(md):
        return ""
    return f"{_seconds(mn)} / {_seconds(md)}" if mn != md else _seconds(md)


def methods_table(frame: pd.DataFrame) -> Table | None:
    keys = frame[frame["probe"].str.startswith("method-")][
        ["problem", "method", "backend", "variant", "mode", "threads", "budget_note"]
    ].drop_duplicates()
    if keys.empty:
        return None
    rows = []
    for _, k in keys.iterrows():
        labels = {c: k[c] for c in ("problem", "method", "backend", "variant")}
        rows.append(
            (
                k["problem"],
                k["method"],
                k["backend"],
                str(k["mode"]),
                str(k["threads"]),
                _seconds(_value(frame, "compile_s", **labels)),
                _min_median(frame, "grad_s", labels),
                _min_median(frame, "step_s", labels),
                fmt.number(_value(frame, "ess_bulk_median", **labels)),
                _min_median(frame, "s_per_ess", labels),
                fmt.number(_value(frame, "test_ll", **labels)),
                str(k["budget_note"] or ""),
            )
        )
    header = (
        "problem",
        "method",
        "backend",
        "path",
        "torch threads",
        "compile (median)",
        "per gradient (min / median)",
        "per step (min / median)",
        "ESS (median over test points)",
        "per effective sample (min / median)",
        "test LL",
        "budget",
    )
    numeric = (False,) * 5 + (True,) * 6 + (False,)
    caption = (
        "Through fit(): compile apart; per gradient = sampling time / leapfrog steps; per step = "
        "optimisation or SG-MCMC time / steps; per effective sample = warmup + sampling time / "
        "median bulk ESS of the predictive mean at the test points."
    )
    return Table(header, tuple(rows), caption, (), numeric)


def conv_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Per conv probe (one backend): the plain and the Bayesian step (medians), their ratio,
    steps per second and seconds per MNIST epoch (60,000 images / batch size) of the Bayesian
    step, and both compile times."""
    part = frame[frame["probe"].str.startswith("conv-")]
    out = []
    for probe, rows in part.groupby("probe", sort=False):
        variants = [v for v in rows["variant"].unique() if v != "plain"]
        if not variants:
            continue
        labels = {"probe": probe}
        bayes, plain = (_value(rows, "step_s", variant=v, **labels) for v in (variants[0], "plain"))
        batch = int(rows["batch_size"].iloc[0])
        out.append(
            {
                "problem": rows["problem"].iloc[0],
                "backend": rows["backend"].iloc[0],
                "estimator": variants[0],
                "batch_size": batch,
                "plain_s": plain,
                "bayes_s": bayes,
                "ratio": _ratio(bayes, plain),
                "repeat_ratio": _value(rows, "step_ratio", variant=variants[0], **labels),
                "repeat_ratio_min": _value(
                    rows, "step_ratio", "min", variant=variants[0], **labels
                ),
                "steps_per_s": _ratio(1.0, bayes),
                "epoch_s": math.ceil(MNIST_TRAIN / batch) * bayes,
                "plain_compile_s": _value(rows, "compile_s", variant="plain", **labels),
                "bayes_compile_s": _value(rows, "compile_s", variant=variants[0], **labels),
            }
        )
    return out


def conv_table(frame: pd.DataFrame) -> Table | None:
    """:func:`conv_rows` as a table; the goal is a ratio <= :data:`CONV_GOAL`."""
    entries = conv_rows(frame)
    if not entries:
        return None
    rows = tuple(
        (
            e["problem"],
            e["backend"],
            e["estimator"],
            str(e["batch_size"]),
            _seconds(e["plain_s"]),
            _seconds(e["bayes_s"]),
            fmt.number(e["ratio"]),
            f"{fmt.number(e['repeat_ratio_min'])} / {fmt.number(e['repeat_ratio'])}",
            fmt.number(e["steps_per_s"]),
            _seconds(e["epoch_s"]),
            _seconds(e["plain_compile_s"]),
            _seconds(e["bayes_compile_s"]),
        )
        for e in entries
    )
    header = (
        "images", "backend", "estimator", "batch", "plain step", "Bayesian step", "ratio",
        "ratio per repeat (min / median)", "steps/s", "per epoch", "compile (plain)",
        "compile (Bayesian)",
    )  # fmt: skip
    caption = (
        "LeNet-5 on 28x28x1 images: mean-field SVI through fit() (the estimator, minibatches "
        "of the batch size) against a plain LeNet-5 training step in the same framework (forward, "
        "cross-entropy, backward, Adam; JAX: a compiled loop, torch: torch.optim.Adam from "
        "Python), alternating within each repeat. ratio: the medians' quotient; per repeat: "
        f"each repeat's own quotient. Per epoch = {MNIST_TRAIN:,} images / batch x Bayesian "
        f"step; compile apart (torch: the first step). Goal: ratio <= {fmt.number(CONV_GOAL)}."
    )
    return Table(header, rows, caption, (), (False,) * 4 + (True,) * 8)


def floors_table(frame: pd.DataFrame, problem: str) -> Table | None:
    part = frame[
        (frame["problem"] == problem) & frame["quantity"].isin(["grad_s", "kernel_s_per_step"])
    ]
    part = part[part["probe"].str.startswith("floor-")]
    if part.empty:
        return None
    rows = [
        (r["quantity"], r["backend"], str(r["variant"]), _seconds(r["min"]), _seconds(r["median"]))
        for _, r in part.iterrows()
    ]
    f = floors(frame, problem)
    rows.append(
        (
            "floor of Pyro NUTS",
            "pyro",
            "kernel + cheapest bare gradient",
            "",
            _seconds(f["pyro_nuts"]),
        )
    )
    rows.append(
        (
            "strict floor of Pyro NUTS",
            "pyro",
            "kernel + cheapest gradient",
            "",
            _seconds(f["pyro_nuts_strict"]),
        )
    )
    caption = (
        f"Floors on {problem}: bare gradients of the same potential (numpyro: jitted, inside a "
        "compiled loop; pyro: a hand-written torch potential and the Pyro model's flat potential, "
        "called from Python as samplers call them) and Pyro's kernel cost per leapfrog step on "
        "a nearly free potential of the same dimension."
    )
    return Table(
        ("quantity", "backend", "variant", "min", "median"),
        tuple(rows),
        caption,
        (),
        (False, False, False, True, True),
    )


def _simple_table(
    frame: pd.DataFrame,
    quantities: str | tuple[str, ...],
    columns: tuple[str, ...],
    caption: str,
    probes: str = "",
) -> Table | None:
    """Min and median of ``quantities`` per row, for probes whose name starts with ``probes``."""
    wanted = (quantities,) if isinstance(quantities, str) else quantities
    part = frame[frame["quantity"].isin(wanted) & frame["probe"].str.startswith(probes)]
    if part.empty:
        return None

    def show(r: pd.Series, stat: str) -> str:
        return _seconds(r[stat]) if r.get("unit", "s") == "s" else _label(r[stat])

    rows = tuple(
        (*(_label(r.get(c)) for c in columns), show(r, "min"), show(r, "median"))
        for _, r in part.iterrows()
    )
    return Table(
        (*columns, "min", "median"), rows, caption, (), (False,) * len(columns) + (True, True)
    )


def cost_figure(frame: pd.DataFrame) -> Figure | None:
    """Per gradient (HMC/NUTS), per step (SVI, SGLD) and per effective sample, log scale, per
    (method, backend, path)."""
    part = frame[frame["probe"].str.startswith("method-")]
    panels = [
        ("grad_s", "seconds per gradient"),
        ("step_s", "seconds per step"),
        ("s_per_ess", "seconds per effective sample"),
    ]
    panels = [(q, t) for q, t in panels if (part["quantity"] == q).any()]
    if not panels:
        return None
    fig = MplFigure(figsize=(5.0 * len(panels), 4.2), dpi=100, layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    problem = str(part["problem"].iloc[0])
    f = floors(frame, problem)
    for ax, (quantity, title) in zip(axes, panels, strict=True):
        data = part[part["quantity"] == quantity].reset_index(drop=True)
        labels = [f"{r.method} {r.backend} ({r.variant})" for r in data.itertuples()]
        ys = np.arange(len(data))
        for y, r in zip(ys, data.itertuples(), strict=True):
            ax.plot([r.min, r.median], [y, y], color="0.6", linewidth=1, zorder=1)
            ax.scatter(
                r.median,
                y,
                color=method_color(r.method),
                marker=backend_marker(r.backend),
                s=40,
                zorder=3,
            )
            ax.scatter(r.min, y, color="black", s=8, zorder=4)
        ax.scatter([], [], color="0.4", marker="o", s=40, label="median (o NumPyro, s Pyro)")
        ax.scatter([], [], color="black", s=8, label="fastest repeat")
        ax.grid(axis="x", which="both", alpha=0.3)
        ax.set_yticks(ys, labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
        ax.set_title(title, fontsize=10)
        if quantity == "grad_s":
            for key, style, label in (
                ("jax", ":", "JAX floor"),
                ("pyro_nuts", "--", "Pyro NUTS floor"),
                ("pyro_nuts_strict", "-.", "Pyro NUTS strict floor"),
            ):
                if math.isfinite(f[key]):
                    ax.axvline(f[key], color="0.3", linestyle=style, linewidth=1, label=label)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
    caption = (
        f"Cost on {problem} through fit(), log scale: medians over repeats (circles NumPyro, "
        "squares Pyro) and the fastest repeat (dots); vertical lines mark the floors measured in "
        "the same run."
    )
    return Figure("perf-cost", _png(fig), caption)


def scaling_figure(frame: pd.DataFrame) -> Figure | None:
    part = frame[frame["probe"].str.startswith("scaling-")].copy()
    if part.empty:
        return None
    part["n"] = part["n"].astype(int)
    part["width"] = part["width"].astype(int)
    base_n = int(part["n"].mode().iloc[0])
    base_width = int(part["width"].mode().iloc[0])
    series = [
        ("grad_s", "numpyro", "bare_jit", "JAX bare gradient"),
        ("nuts_grad_s", "numpyro", "nuts", "NumPyro NUTS"),
        ("grad_s", "pyro", "bare_traced", "torch bare gradient (traced)"),
        ("grad_s", "pyro", "pyro_compiled", "Pyro potential, compiled"),
        ("nuts_grad_s", "pyro", "compiled", "Pyro NUTS (compiled)"),
    ]
    fig = MplFigure(figsize=(10, 3.6), dpi=100, layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, (axis, fixed, fixed_value) in zip(
        axes, (("n", "width", base_width), ("width", "n", base_n)), strict=True
    ):
        for quantity, backend, variant, label in series:
            s = part[
                (part["quantity"] == quantity)
                & (part["backend"] == backend)
                & (part["variant"] == variant)
                & (part[fixed] == fixed_value)
            ]
            s = s.sort_values(axis)
            if len(s):
                ax.plot(s[axis], s["median"], marker=backend_marker(backend), label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain_log_ticks(ax.xaxis)
        ax.set_xlabel("training points n" if axis == "n" else "hidden units")
        ax.set_ylabel("seconds per gradient")
        ax.set_title(f"{fixed} = {fixed_value}", fontsize=10)
    axes[0].legend(fontsize=7)
    caption = (
        "Growth of the cost per gradient with data size and width (one tanh layer, 8 inputs, "
        "synthetic data); medians over repeats."
    )
    return Figure("perf-scaling", _png(fig), caption)


def build_perf_document(results: SuiteResults) -> Document:
    """The performance report for a suite of probes."""
    frame = rows_frame(r for r in results.records if r.get("status") == "ok")
    problem = "sine"
    sections = [_overview_section(results)]
    if frame.empty:
        return Document(f"ppl_bnn performance: {results.name}", "", sections)
    for section in (
        _headline_section(frame, problem),
        _cost_section(frame),
        _maybe_section("Floors", "floors", floors_table(frame, problem)),
        *(_maybe_section(*extra) for extra in _extra_tables(frame)),
        _scaling_section(frame),
        environment_section(results),
    ):
        if section is not None:
            sections.append(section)
    return Document(
        f"ppl_bnn performance: {results.name}",
        "All figures from one run of the suite.",
        sections,
        progress=results.progress,
    )


def _maybe_section(title: str, anchor: str, block: Any) -> Section | None:
    """A section of one block, or None where there is nothing to show."""
    return None if block is None else Section(title, anchor, [block])


def _overview_section(results: SuiteResults) -> Section:
    """The suite's description, its probes by status and wall time, and each failure."""
    suite = results.suite
    overview = Section("Overview", "overview", [Paragraph.of(suite.get("description", ""))])
    statuses = pd.Series([r.get("status") for r in results.records]).value_counts()
    wall = f"; suite wall time {fmt.number(suite['wall_s'])} s." if suite.get("wall_s") else "."
    overview.blocks.append(
        Paragraph.of(
            f"{len(results.records)} probes: "
            + ", ".join(f"{n} {s}" for s, n in statuses.items())
            + wall
        )
    )
    for record in results.records:
        if record.get("status") != "ok" and record.get("error"):
            err = record["error"]
            overview.blocks.append(
                Details(
                    f"{record['cell_id']}: {err.get('type')}: {err.get('message')}",
                    err.get("traceback") or "",
                )
            )
    return overview


def _headline_section(frame: pd.DataFrame, problem: str) -> Section | None:
    """The headline ratios measured in this run, where any is finite."""
    ratios = [
        (what, value, how) for what, value, how in headline(frame, problem) if math.isfinite(value)
    ]
    if not ratios:
        return None
    return Section(
        "Headline ratios",
        "headline",
        [
            Paragraph.of(
                f"Measured in this run on the {problem} problem; each ratio divides "
                "two rows of the tables below."
            ),
            Table(
                ("ratio", "value", "meaning"),
                tuple((w, fmt.ratio(v), h) for w, v, h in ratios),
                "",
                (),
                (False, True, False),
            ),
        ],
    )


def _cost_section(frame: pd.DataFrame) -> Section:
    """Cost per method and backend: the table, the figure and Pyro's reduced budgets."""
    cost = Section("Cost per method and backend", "methods")
    for block in (methods_table(frame), cost_figure(frame)):
        if block is not None:
            cost.blocks.append(block)
    notes = sorted({n for n in frame["budget_note"].dropna() if n})
    if notes:
        cost.blocks.append(
            Paragraph.of(
                "Where Pyro's budget was reduced (costs per gradient and per step do not "
                "depend on the budget; per effective sample does):"
            )
        )
        cost.blocks.append(BulletList(tuple((n,) for n in notes)))
    return cost


def _extra_tables(frame: pd.DataFrame) -> list[tuple[str, str, Table | None]]:
    """The sections of one table each: title, anchor and table (None where not measured)."""
    return [
        (
            "Overhead of fit",
            "overhead",
            _simple_table(
                frame,
                "call_s",
                ("method", "backend", "variant"),
                "Wall time of the whole call less JAX compilation: fit() vs NumPyro called "
                "directly with the same model, keys and settings.",
            ),
        ),
        (
            "Prediction",
            "predict",
            _simple_table(
                frame,
                "predict_s",
                ("backend", "variant", "draws", "points", "parallel"),
                "FitResult.predict: every draw at every point, vectorised (NumPyro: the draws "
                "split over the host devices); the first call compiles.",
            ),
        ),
        (
            "Parallel cells",
            "throughput",
            _simple_table(
                frame,
                ("sweep_wall_s", "cell_time_s", "jax_cache_hits"),
                ("quantity", "cache", "variant", "cells"),
                "Wall time of the same CPU-bound cells (Pyro SVI and NumPyro NUTS) with "
                "--jobs 1 and --jobs 2, threads per cell = cores / jobs: the whole sweep "
                "(sweep_wall_s), the cells' own wall times summed (cell_time_s) and their JAX "
                "cache hits summed (jax_cache_hits). cache warm: "
                "the cells share a JAX persistent cache filled beforehand, as ppl-bnn bench "
                "runs them; none: every NumPyro cell compiles its programs, and XLA's compiler "
                "works on more than one core, which a cell sharing the cores cannot.",
                probes="throughput",
            ),
        ),
        (
            "Compilation cache",
            "compile-cache",
            _simple_table(
                frame,
                ("compile_s", "fit_s", "xla_compiles", "jax_cache_hits"),
                ("method", "variant", "quantity"),
                "The same NumPyro fit in two new processes sharing an empty JAX persistent "
                "compilation cache: cold, the first, compiles every program and fills the cache; "
                "warm, the second, loads them. A repeated fit of the same model shape in a new "
                "process should compile in seconds. compile_s: tracing, lowering and compiling "
                "or loading; fit_s: the whole fit; xla_compiles and jax_cache_hits: programs "
                "compiled and loaded.",
                probes="compile-cache-",
            ),
        ),
        ("LeNet-5: Bayesian step against a plain step", "conv", conv_table(frame)),
    ]


def _scaling_section(frame: pd.DataFrame) -> Section | None:
    """Growth with data size and width: the figure and the gradient floors."""
    scaling = Section("Growth with data size and width", "scaling")
    for block in (
        scaling_figure(frame),
        _simple_table(
            frame,
            "grad_s",
            ("n", "width", "backend", "variant"),
            "Gradient floors on the synthetic sets.",
            probes="scaling-",
        ),
        _simple_table(
            frame,
            "nuts_grad_s",
            ("n", "width", "backend", "variant"),
            "NUTS per gradient through fit().",
        ),
    ):
        if block is not None:
            scaling.blocks.append(block)
    return scaling if scaling.blocks else None
