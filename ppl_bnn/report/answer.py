"""The answer on the report's first screen: one recommendation per dataset (:mod:`.recommend`)
and the scoreboard of every method's standing on every dataset and backend."""

from __future__ import annotations

from ppl_bnn.report.document import Block, BulletList, Link, Mark, Scoreboard, slug
from ppl_bnn.report.load import SuiteResults, backend_key, method_key
from ppl_bnn.report.recommend import Recommendation, margins_of, recommend, with_cost

SCOREBOARD_CAPTION = (
    "Each method's standing per dataset and backend (hover a cell for its number): trust (the "
    "closest to a reference with a floor, or without one the best held-out test log-likelihood), "
    "as good (shown equivalent to the trusted one within the margin), undecided (its splits "
    "and seeds cannot tell: more seeds would), worse (shown worse by more than the margin), "
    "avoid (unusable, diverged, or over-confident out of range), not judged (failed, timed out "
    "or a reduced budget); "
    "\u00b7 not run. The rule is stated under Summary."
)


def recommendations(results: SuiteResults) -> dict[str, Recommendation]:
    """Dataset -> its recommendation, in the suite's dataset order (fidelity columns must be
    on the cells already: :func:`~ppl_bnn.report.fidelity.with_fidelity`)."""
    out = {}
    margins = margins_of(results)
    for dataset in results.datasets():
        cells = with_cost(results.cells[results.cells["dataset"] == dataset])
        references = results.references_of(dataset)
        out[dataset] = recommend(dataset, cells, references, margins)
    return out


def answer_blocks(recs: dict[str, Recommendation]) -> tuple[Block, ...]:
    """The recommendations, one line per dataset linked to its Summary, then the scoreboard."""
    if not recs:
        return ()
    items = tuple(
        (Link(dataset, f"#{slug('summary', dataset)}"), ": ", rec.sentence())
        for dataset, rec in recs.items()
    )
    return (BulletList(items), scoreboard(recs))


def scoreboard(recs: dict[str, Recommendation]) -> Scoreboard:
    """Methods by (dataset, backend), each cell the method's grade there."""
    groups, columns = [], []
    for dataset, rec in recs.items():
        backends = sorted({s.group[1] for s in rec.standings}, key=backend_key)
        groups.append((dataset, tuple(backends)))
        columns += [(dataset, backend) for backend in backends]
    standing = {(d, *s.group): (s, rec) for d, rec in recs.items() for s in rec.standings}
    methods = sorted({s.group[0] for rec in recs.values() for s in rec.standings}, key=method_key)
    rows = []
    for method in methods:
        marks = []
        for dataset, backend in columns:
            found = standing.get((dataset, method, backend))
            if found is None:
                marks.append(None)
                continue
            s, rec = found
            title = f"{method}/{backend} on {dataset}: {s.grade}"
            number = s.number(rec.basis)
            marks.append(
                Mark(str(s.grade), str(s.grade), f"{title}; {number}" if number else title)
            )
        rows.append((method, tuple(marks)))
    return Scoreboard(tuple(groups), tuple(rows), SCOREBOARD_CAPTION)


def verdict(recs: dict[str, Recommendation]) -> tuple[dict, ...]:
    """The recommendations as JSON-ready data (``summary.json``)."""
    return tuple(rec.to_dict() for rec in recs.values())
