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
from ppl_bnn.report.perf_ratios import (
    backend_title,
    backends_of,
    floors,
    headline,
    perf_of,
    ratio,
    seconds,
    value,
)
from ppl_bnn.report.style import backend_marker, method_color

#: The goal for the conv probe: a Bayesian LeNet-5 step at most this many plain steps.
CONV_GOAL = 3.0
#: The line styles of the floors in the cost figure, in turn.
_FLOOR_STYLES = (":", "--", "-.", (0, (1, 3)), (0, (5, 1)), (0, (3, 1, 1, 1)))

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


def _label(value: object) -> str:
    """A label cell: whole numbers without a decimal point, missing as blank."""
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else fmt.number(value)
    return str(value)


def _min_median(frame: pd.DataFrame, quantity: str, labels: dict[str, Any]) -> str:
    mn = value(frame, quantity, "min", **labels)
    md = value(frame, quantity, "median", **labels)
    if not math.isfinite(md):
        return ""
    return f"{seconds(mn)} / {seconds(md)}" if mn != md else seconds(md)


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
                seconds(value(frame, "compile_s", **labels)),
                _min_median(frame, "grad_s", labels),
                _min_median(frame, "step_s", labels),
                fmt.number(value(frame, "ess_bulk_median", **labels)),
                _min_median(frame, "s_per_ess", labels),
                fmt.number(value(frame, "test_ll", **labels)),
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
        bayes, plain = (value(rows, "step_s", variant=v, **labels) for v in (variants[0], "plain"))
        batch = int(rows["batch_size"].iloc[0])
        out.append(
            {
                "problem": rows["problem"].iloc[0],
                "backend": rows["backend"].iloc[0],
                "estimator": variants[0],
                "batch_size": batch,
                "plain_s": plain,
                "bayes_s": bayes,
                "ratio": ratio(bayes, plain),
                "repeat_ratio": value(rows, "step_ratio", variant=variants[0], **labels),
                "repeat_ratio_min": value(rows, "step_ratio", "min", variant=variants[0], **labels),
                "steps_per_s": ratio(1.0, bayes),
                "epoch_s": math.ceil(MNIST_TRAIN / batch) * bayes,
                "plain_compile_s": value(rows, "compile_s", variant="plain", **labels),
                "bayes_compile_s": value(rows, "compile_s", variant=variants[0], **labels),
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
            seconds(e["plain_s"]),
            seconds(e["bayes_s"]),
            fmt.number(e["ratio"]),
            f"{fmt.number(e['repeat_ratio_min'])} / {fmt.number(e['repeat_ratio'])}",
            fmt.number(e["steps_per_s"]),
            seconds(e["epoch_s"]),
            seconds(e["plain_compile_s"]),
            seconds(e["bayes_compile_s"]),
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
        (r["quantity"], r["backend"], str(r["variant"]), seconds(r["min"]), seconds(r["median"]))
        for _, r in part.iterrows()
    ]
    for backend, floor in floors(frame, problem).items():
        if math.isfinite(floor.kernel):
            title = backend_title(backend)
            rows += [
                (f"floor of {title} NUTS", backend, "kernel + cheapest bare gradient", "",
                 seconds(floor.sampler)),
                (f"strict floor of {title} NUTS", backend, "kernel + cheapest gradient", "",
                 seconds(floor.strict)),
            ]  # fmt: skip
    caption = (
        f"Floors on {problem}: bare gradients of the same potential in each backend's framework "
        "(JAX: jitted, inside a compiled loop; torch: a hand-written potential and the Pyro "
        "model's flat potential, called from Python as samplers call them) and the cost per "
        "leapfrog step of the kernels that run apart from the potential, on a nearly free "
        "potential of the same dimension."
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
        return seconds(r[stat]) if r.get("unit", "s") == "s" else _label(r[stat])

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
        markers = ", ".join(f"{backend_marker(b)} {backend_title(b)}" for b in backends_of(data))
        ax.scatter([], [], color="0.4", marker="o", s=40, label=f"median ({markers})")
        ax.scatter([], [], color="black", s=8, label="fastest repeat")
        ax.grid(axis="x", which="both", alpha=0.3)
        ax.set_yticks(ys, labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
        ax.set_title(title, fontsize=10)
        if quantity == "grad_s":
            lines = [(f"{backend_title(b)} NUTS floor", fl.sampler) for b, fl in f.items()]
            lines += [
                (f"{backend_title(b)} NUTS strict floor", fl.strict)
                for b, fl in f.items()
                if math.isfinite(fl.kernel)
            ]
            for (label, x), style in zip(lines, _FLOOR_STYLES, strict=False):
                if math.isfinite(x):
                    ax.axvline(x, color="0.3", linestyle=style, linewidth=1, label=label)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
    caption = (
        f"Cost on {problem} through fit(), log scale: medians over repeats (one marker per "
        "backend) and the fastest repeat (dots); vertical lines mark the floors measured in "
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
    series = _scaling_series(part)
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


def _scaling_series(part: pd.DataFrame) -> list[tuple[str, str, str, str]]:
    """``(quantity, backend, variant, label)`` of each line of the scaling figure: every
    backend's bare gradients and compiled potentials, then its NUTS."""
    out = []
    for backend in backends_of(part):
        perf = perf_of(backend)
        labels = dict(perf.GRADIENT_VARIANTS) if perf else {}
        mine = part[part["backend"] == backend]
        for variant in mine[mine["quantity"] == "grad_s"]["variant"].drop_duplicates():
            if variant in labels and ("bare" in variant or "compiled" in variant):
                out.append(("grad_s", backend, variant, labels[variant]))
        for variant in mine[mine["quantity"] == "nuts_grad_s"]["variant"].drop_duplicates():
            path = "" if variant == "nuts" else f" ({variant})"
            out.append(("nuts_grad_s", backend, variant, f"{backend_title(backend)} NUTS{path}"))
    return out


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
