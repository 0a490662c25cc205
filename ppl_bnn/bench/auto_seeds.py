r"""``seeds = "auto"``: replicates added where the verdict needs them.

With three seeds most contestants that are in truth as good as the trusted one come out
*undecided* (:mod:`ppl_bnn.report.equivalence`): the seeds cannot tell. A suite with
``seeds = "auto"`` (``compare(seeds="auto")``) runs seeds
:data:`~ppl_bnn.bench.suite.AUTO_SEEDS` first, renders its verdict, and then, round by round,
adds the next seed to every undecided contestant of a dataset and to that dataset's trusted one
(the comparison is paired), until no contestant is undecided or each has
:data:`~ppl_bnn.bench.suite.AUTO_CAP` seeds. A resumed run picks up where the stored cells leave
off: the rounds are computed from what is stored. Contestants that are decided, avoided or not
judged get no more seeds.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ppl_bnn.bench.cell import Cell
from ppl_bnn.bench.suite import Suite
from ppl_bnn.report.answer import recommendations
from ppl_bnn.report.fidelity import with_fidelity
from ppl_bnn.report.load import load_results
from ppl_bnn.report.recommend import Grade, Recommendation

Group = tuple[str, str, str]  # (dataset label, contestant, backend)


def seeds_to_add(
    recs: Mapping[str, Recommendation], seeds: Mapping[Group, set[int]], cap: int
) -> dict[Group, int]:
    """(dataset label, contestant, backend) -> the seed to add next: for every undecided
    contestant of a dataset and that dataset's trusted one, the smallest seed it has not run,
    while it has run fewer than ``cap`` (``seeds``: the seeds each has run)."""
    out: dict[Group, int] = {}
    for dataset, rec in recs.items():
        undecided = rec.graded(Grade.UNDECIDED)
        trusted = rec.trusted
        if not undecided or trusted is None:
            continue
        for standing in [trusted, *undecided]:
            key = (dataset, *standing.group)
            done = seeds.get(key, set())
            missing = set(range(cap)) - done
            if len(done) < cap and missing:
                out[key] = min(missing)
    return out


def seeds_run(cells: pd.DataFrame) -> dict[Group, set[int]]:
    """The seeds each (dataset, contestant, backend) of a results frame has run."""
    out: dict[Group, set[int]] = {}
    for (dataset, method, backend), group in cells.groupby(["dataset", "method", "backend"]):
        out[(str(dataset), str(method), str(backend))] = {int(s) for s in group["seed"]}
    return out


def more_cells(
    suite: Suite,
    results_dir: Path,
    *,
    data_dir: str | None = None,
    max_splits: int | None = None,
    only: Mapping[str, set[str]] | None = None,
) -> list[Cell]:
    """The cells of the next round: the verdict on what ``results_dir`` holds, and a cell per
    split for each contestant :func:`seeds_to_add` names, at the seed it names (among the
    cells ``max_splits`` and ``only`` select)."""
    if suite.auto_seeds is None:
        return []
    results = with_fidelity(load_results(results_dir))
    if results.cells.empty:
        return []
    need = seeds_to_add(recommendations(results), seeds_run(results.cells), suite.auto_seeds)
    cells = suite.cells(max_splits=max_splits, data_dir=data_dir, only=only, seeds=suite.all_seeds)
    return [c for c in cells if need.get((c.label, c.contestant, c.backend)) == c.seed]


def stored_cells(
    suite: Suite,
    cells_dir: Path,
    known: set[str],
    *,
    data_dir: str | None = None,
    max_splits: int | None = None,
    only: Mapping[str, set[str]] | None = None,
) -> list[Cell]:
    """The cells of seeds an earlier run added (beyond ``known``) that have a folder under
    ``cells_dir``: a resumed run counts them as its own."""
    if suite.auto_seeds is None:
        return []
    cells = suite.cells(max_splits=max_splits, data_dir=data_dir, only=only, seeds=suite.all_seeds)
    return [c for c in cells if c.cell_id not in known and (cells_dir / c.cell_id).is_dir()]
