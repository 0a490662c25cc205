"""What the report says of a dataset's reference posteriors: the captions of the tables that
compare with them, the chain ensemble and its floor in words, why a reference has no floor and
what to try, and the table of each split's reference."""

from __future__ import annotations

from collections.abc import Sequence

from ppl_bnn.reference import ENGINE_DEFAULTS, GATE
from ppl_bnn.report import fmt
from ppl_bnn.report.document import Strong, Table
from ppl_bnn.report.fmt import first_line
from ppl_bnn.report.load import SuiteResults
from ppl_bnn.report.reference_entries import (
    REFERENCE_RETRY,
    ReferenceEntry,
    reference_failure,
    references_pass,
)

#: How a reference's note starts where it has no floor
#: (:func:`ppl_bnn.reference.reference_document`).
NO_FLOOR_PREFIX = "no floor:"
#: What the Summary and the fidelity table say of a dataset whose references do not all have a
#: floor, i.e. did not all pass their gate
#: (:func:`~ppl_bnn.report.reference_entries.references_pass`).
NOT_RANKED = "not ranked: reference has no floor"


def _without_floor(results: SuiteResults, dataset: str) -> str:
    """``"split(s) 0, 2"``: the splits of ``dataset`` whose reference has predictions but no
    floor (it failed its gate)."""
    bad = [e for e in results.references_of(dataset) if e.usable and not e.passed]
    return "split(s) " + ", ".join(str(e.split) for e in bad)


def _no_floor(results: SuiteResults, dataset: str) -> str:
    """Why the references of ``dataset`` that have predictions have no floor."""
    usable = [e for e in results.references_of(dataset) if e.usable]
    return no_floor_detail([e for e in usable if not e.passed], usable)


def unranked_caption(results: SuiteResults, dataset: str) -> str:
    """The caption of ``dataset``'s fidelity table where its references do not all have a
    floor: which splits, why, and that nothing ranks on these distances."""
    return (
        f"{NOT_RANKED.capitalize()}. The reference of {_without_floor(results, dataset)} HAS NO "
        f"FLOOR ({_no_floor(results, dataset)}): these distances to the reference posterior of "
        "each split are indicative only, no contestant is marked best on them, and neither the "
        "Summary nor any other table uses them."
    )


def _floors(results: SuiteResults, dataset: str) -> str:
    """``"W2 0.041 on split 0, 0.038 on split 1"``: each split's floor."""
    entries = [e for e in results.references_of(dataset) if e.usable and e.floor is not None]
    if not entries:
        return ""
    metric = entries[0].floor_metric
    return f"{metric} " + ", ".join(f"{fmt.number(e.floor, 2)} on split {e.split}" for e in entries)


def reference_caption(results: SuiteResults, dataset: str) -> str:
    """What the fidelity columns of ``dataset`` compare with, or why there are none."""
    entries = results.references_of(dataset)
    if not entries:
        return " No reference posterior: the suite computes none."
    usable = [e for e in entries if e.usable]
    failure = reference_failure(entries)
    if not usable and failure is not None:
        return f" No fidelity is shown: {failure}; {REFERENCE_RETRY}."
    if not usable:
        notes = sorted({e.note or e.status for e in entries})
        return f" No reference posterior ({'; '.join(notes)}): no fidelity is shown."
    if not references_pass(entries):
        return (
            f" No fidelity is shown: the reference of {_without_floor(results, dataset)} HAS NO "
            f"FLOOR ({_no_floor(results, dataset)}), so distances to it rank nothing; they are "
            "listed apart, not ranked, under Against the reference posterior."
        )
    return (
        " Fidelity: distance of each predictive to the reference posterior of its split (a "
        "chain ensemble; Izmailov et al. 2021 definitions), with its mean ratio to the "
        f'reference\'s floor ({_floors(results, dataset)}): "k\u00d7 the floor", or, within '
        f'the floor, "{fmt.INDISTINGUISHABLE}".'
    )


def _span(values: Sequence[float | None], sig: int) -> str:
    """``"0.041"``, or ``"0.035\u20130.041"`` where the values differ (as shown); "?" for none."""
    found = [v for v in values if v is not None]
    if not found:
        return "?"
    low, high = fmt.number(min(found), sig), fmt.number(max(found), sig)
    return low if low == high else f"{low}\u2013{high}"


def _dropped_reason(reason: str) -> str:
    """A dropped chain's reason in a few words: ``"frozen"`` of ``"frozen: step size ..."``."""
    return reason.split(":")[0].split(" (")[0].strip()


def _dropped(entries: Sequence[ReferenceEntry]) -> str:
    """``"62 kept; 2 dropped, frozen"``, ``"all 64 kept"``: the chains kept, and how many were
    dropped and why (where the references' records say); "" where the counts are unknown."""
    kept = _span([e.chains_kept for e in entries], 3)
    if kept == "?":
        return ""
    gone = sum(
        e.chains_run - e.chains_kept
        for e in entries
        if e.chains_run is not None and e.chains_kept is not None
    )
    if not gone:
        return f"all {kept} kept"
    reasons: dict[str, int] = {}
    for e in entries:
        for reason in e.dropped.values():
            words = _dropped_reason(reason)
            reasons[words] = reasons.get(words, 0) + 1
    text = f"{kept} kept; {gone} dropped" + (" in all" if len(entries) > 1 else "")
    if len(reasons) == 1 and sum(reasons.values()) == gone:
        return f"{text}, {next(iter(reasons))}"
    if reasons:
        return f"{text}: " + ", ".join(f"{n} {why}" for why, n in reasons.items())
    return text


def ensemble_description(entries: Sequence[ReferenceEntry]) -> str:
    """The references of a dataset's splits that have a floor, in one sentence: "a chain
    ensemble of 64 MCLMC chains from deep-ensemble starts (62 kept; 2 dropped, frozen), floor
    W2 0.041 (0.0098 standardised), sampled in 412 s (reached the target floor); across-chain
    R-hat 1.27 measures how multimodal the posterior is, not convergence." Over several splits,
    each number is the range over them."""
    several = len(entries) > 1
    engines = sorted({e.engine.upper() for e in entries if e.engine})
    sampler = f"{' and '.join(engines)} chains" if engines else "chains"
    run = _span([e.chains_run for e in entries], 3)
    dropped = _dropped(entries)
    text = f"a chain ensemble of {run} {sampler} from deep-ensemble starts" + (
        f" ({dropped})" if dropped else ""
    )
    metrics = {e.floor_metric for e in entries if e.floor_metric}
    if metrics:
        text += f", floor {'/'.join(sorted(metrics))} {_span([e.floor for e in entries], 2)}"
        if metrics == {"W2"} and any(e.floor_std is not None for e in entries):
            text += f" ({_span([e.floor_std for e in entries], 2)} standardised)"
    if any(e.seconds is not None for e in entries):
        text += f", sampled in {_span([e.seconds for e in entries], 3)} s"
    stops: dict[str, int] = {}
    for e in entries:
        if e.stopped:
            stops[e.stopped] = stops.get(e.stopped, 0) + 1
    if len(stops) == 1 and not several:
        text += f" ({next(iter(stops))})"
    elif stops:
        text += " (" + "; ".join(f"{why} on {n} of {len(entries)} splits"
                                 for why, n in stops.items()) + ")"  # fmt: skip
    rhat = [e.rhat_across for e in entries]
    if any(r is not None for r in rhat):
        text += (
            f"; across-chain R-hat {_span(rhat, 3)} measures how multimodal the posterior is, "
            "not convergence"
        )
    if several:
        text = f"on each of {len(entries)} splits, {text}"
    return text + "."


def no_floor_detail(bad: Sequence[ReferenceEntry], usable: Sequence[ReferenceEntry]) -> str:
    """Why the references in ``bad`` have no floor, from their notes: ``"3 of 16 chains kept,
    fewer than the 4 a floor needs"``, each with its split where ``usable`` holds several."""

    def why(e: ReferenceEntry) -> str:
        note = first_line(e.note).removeprefix(NO_FLOOR_PREFIX).strip()
        if note:
            return note
        return f"{_span([e.chains_kept], 3)} of {_span([e.chains_run], 3)} chains kept"

    if len(usable) == 1:
        return why(bad[0])
    return "; ".join(f"split {e.split}: {why(e)}" for e in bad)


def floor_remedy(bad: Sequence[ReferenceEntry]) -> str:
    """What to try for references without a floor, with the settings they ran (where they all
    ran the same): ``"more chains (num_chains, now 16) or a longer warm-up (num_warmup, now
    2000)"``."""

    def now(key: str) -> str:
        values = set()
        for e in bad:
            value = e.settings.get(key)
            if value is None and key in ("num_warmup", "num_samples"):
                value = ENGINE_DEFAULTS.get(e.engine or "", {}).get(key)
            values.add(value)
        return f", now {values.pop()}" if len(values) == 1 and None not in values else ""

    chains, warmup = now("num_chains"), now("num_warmup")
    return f"more chains (num_chains{chains}) or a longer warm-up (num_warmup{warmup})"


def _chains_cell(e: ReferenceEntry) -> str:
    """``"62 of 64 (2 frozen)"``: the chains kept of those run, and why the others were
    dropped (where the reference's record says)."""
    if e.chains_run is None and e.chains_kept is None:
        return ""
    kept, run = (fmt.number(v) if v is not None else "?" for v in (e.chains_kept, e.chains_run))
    reasons: dict[str, int] = {}
    for reason in e.dropped.values():
        words = _dropped_reason(reason)
        reasons[words] = reasons.get(words, 0) + 1
    why = ", ".join(f"{n} {words}" for words, n in reasons.items())
    return f"{kept} of {run}" + (f" ({why})" if why else "")


def _floor_cell(e: ReferenceEntry, floor: float | None, standardised: float | None) -> str:
    """``"W2 0.041 (0.0098 standardised)"``, ``"TV 0.012"``, or "" without a floor."""
    if floor is None or e.floor_metric is None:
        return ""
    std = f" ({fmt.number(standardised, 2)} standardised)" if standardised is not None else ""
    return f"{e.floor_metric} {fmt.number(floor, 2)}{std}"


def _engine_cell(e: ReferenceEntry) -> str:
    """``"MCLMC, 2000 + 500 per chain"``: the sampler and each chain's warm-up and draws ("" for
    a reference that has no fit)."""
    if not e.settings or e.passed is None:  # no chains ran
        return ""
    defaults = ENGINE_DEFAULTS.get(e.engine or "", {})
    warmup, draws = (
        e.settings.get(k) if e.settings.get(k) is not None else defaults.get(k, "?")
        for k in ("num_warmup", "num_samples")
    )
    return f"{(e.engine or '?').upper()}, {warmup} + {draws} per chain"


def reference_info_table(results: SuiteResults, dataset: str) -> Table | None:
    """Each split's reference posterior: whether it passed its gate, its chain ensemble
    (sampler, chains run and kept), its floor and random-split floor, across-chain and per-chain
    diagnostics, its cost and why it stopped adding chains."""
    entries = results.references_of(dataset)
    if not entries:
        return None
    rows, classes = [], []
    for e in entries:
        diag = e.diagnostics
        rows.append(
            (
                str(e.split),
                Strong(e.label) if e.passed else e.label,
                _engine_cell(e),
                _chains_cell(e),
                _floor_cell(e, e.floor, e.floor_std),
                _floor_cell(e, e.floor_random, e.floor_std_random),
                fmt.number(e.rhat_across),
                fmt.number(diag.get("rhat_within_median"), 4),
                fmt.number(diag.get("ess_within_median")),
                fmt.number(e.wall_s),
                e.stopped or "",
                e.note or "",
            )
        )
        classes.append("" if e.passed else "problem")
    gate = entries[0].gate.get("min_chains", GATE["min_chains"])
    caption = (
        "The reference posterior of each split: a chain ensemble (chains started at the members "
        "of a deep ensemble, each judged on its own, stuck ones dropped) and its floor, the "
        "distance between two disjoint halves of its kept chains with the contestants' own "
        "fidelity metric and sample sizes (W2 in the target's original units, and "
        "standardised; TV for classification): a contestant within it cannot be told from "
        f"the reference. It passes its gate where it has a floor: at least {gate:g} chains "
        "kept. Random-split floor: the same distance between two random halves of its pooled "
        "draws, its Monte Carlo part alone. R\u0302 across chains measures how multimodal the "
        "posterior is, not convergence (chains never cross between a BNN's modes); per chain: "
        "the median over kept chains of each chain's split-R\u0302 and bulk ESS of its test "
        "predictions. Seconds: the reference's whole run; stopped: why no more chains were "
        "added."
    )
    header = (
        "split", "gate", "sampler", "chains kept", "floor", "random-split floor",
        "R̂ across", "R̂ per chain", "ESS per chain", "seconds", "stopped", "note",
    )  # fmt: skip
    numeric = (True, False, False, False, False, False, True, True, True, True, False, False)
    return Table(header, tuple(rows), caption, tuple(classes), numeric)
