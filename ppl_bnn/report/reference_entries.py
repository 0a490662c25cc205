"""A suite's reference posteriors as stored beside its cells (``references/<name>/``), read
back for the report: each split's :class:`ReferenceEntry`, and the one rule of when fidelity to
them ranks (:func:`references_pass`).

Whatever cannot be read is left out and named in the report's Problems box: an unreadable
``reference.json``, one of an earlier format (counted as missing, so that the next sweep
computes it again), or a complete reference whose predictions are missing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ppl_bnn.bench.record import COMPLETE, FAILED, PREDICTIONS_FILE, RECORD_FILE
from ppl_bnn.files import netcdf_problem
from ppl_bnn.reference import FORMAT as REFERENCE_FORMAT
from ppl_bnn.reference import REFERENCE_FILE, REFERENCES_DIR, read_reference
from ppl_bnn.report.fmt import first_line

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReferenceEntry:
    """A split's reference posterior as stored beside the cells (``references/<name>/``): a
    chain ensemble and its floor (:mod:`ppl_bnn.reference`, ``reference.json`` format 2).

    Attributes:
        dataset, split: What it is the reference of.
        status: ``ok``, ``diverged``, ``failed``, ``timeout`` or ``infeasible``.
        passed: Whether it passed its gate, i.e. has a floor (at least ``gate["min_chains"]``
            chains kept and a finite floor); None when there is no fit.
        note: Why there is none (infeasible), what failed, or why it has no floor ("no floor:
            ...").
        gate: The gate (``min_chains``).
        diagnostics: Chains run and kept, the floors, across-chain R-hat, the kept chains'
            median R-hat and ESS (see :data:`ppl_bnn.reference.DIAGNOSTICS`); null where
            missing.
        settings: How its chains were sampled (engine, most chains, chains per batch, target
            floor, budget, warm-up and draws per chain, seed).
        wall_s: Seconds its process took (where it was computed).
        folder: Where its files are.
        info: From its ``record.json`` where there is one: ``stopped`` (why no more chains were
            added), ``sampling_seconds`` and ``dropped`` (chain -> why it was dropped).
    """

    dataset: str
    split: int
    status: str
    passed: bool | None
    note: str | None
    gate: dict[str, float]
    diagnostics: dict[str, float]
    settings: dict[str, Any]
    wall_s: float | None
    folder: Path
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        """Whether it has predictions to compare with (with a floor or not)."""
        return self.status in ("ok", "diverged") and (self.folder / PREDICTIONS_FILE).is_file()

    @property
    def label(self) -> str:
        """``passed``, ``no floor``, or the status when there is no fit."""
        if self.passed is None:
            return self.status
        return "passed" if self.passed else "no floor"

    def _diagnostic(self, name: str) -> float | None:
        value = self.diagnostics.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value) if np.isfinite(value) else None

    @property
    def floor_metric(self) -> str | None:
        """``"W2"`` (regression) or ``"TV"`` (classification): what its floor measures; None
        without a floor."""
        if self._diagnostic("floor_w2") is not None:
            return "W2"
        return "TV" if self._diagnostic("floor_tv") is not None else None

    @property
    def floor(self) -> float | None:
        """Its floor in the contestants' units: W2 in the target's original units
        (regression), total variation (classification); None without one."""
        found = self._diagnostic("floor_w2")
        return found if found is not None else self._diagnostic("floor_tv")

    @property
    def floor_std(self) -> float | None:
        """Its W2 floor in the model's standardised units (regression only)."""
        return self._diagnostic("floor_w2_std")

    @property
    def floor_random(self) -> float | None:
        """The same statistic on a random split of its pooled draws (its Monte Carlo part
        alone), in the floor's units."""
        if self._diagnostic("floor_w2") is not None:
            return self._diagnostic("floor_w2_random")
        return self._diagnostic("floor_tv_random")

    @property
    def floor_std_random(self) -> float | None:
        """:attr:`floor_random` of W2 in standardised units (regression only)."""
        return self._diagnostic("floor_w2_std_random")

    @property
    def chains_run(self) -> int | None:
        """The chains it sampled."""
        found = self._diagnostic("chains_run")
        return None if found is None else int(found)

    @property
    def chains_kept(self) -> int | None:
        """The chains it kept (the others were stuck: see :attr:`dropped`)."""
        found = self._diagnostic("chains_kept")
        return None if found is None else int(found)

    @property
    def rhat_across(self) -> float | None:
        """R-hat across its kept chains: how multimodal the posterior is, not convergence."""
        return self._diagnostic("rhat_across")

    @property
    def engine(self) -> str | None:
        """The sampler of its chains (``mclmc``, ``nuts``)."""
        engine = self.settings.get("engine")
        return str(engine) if engine else None

    @property
    def stopped(self) -> str | None:
        """Why no more chains were added ("reached the target floor", ...), where known."""
        stopped = self.info.get("stopped")
        return str(stopped) if stopped else None

    @property
    def dropped(self) -> dict[str, str]:
        """Chain -> why it was dropped, where known."""
        return {str(k): str(v) for k, v in (self.info.get("dropped") or {}).items()}

    @property
    def seconds(self) -> float | None:
        """Seconds spent sampling its chains, else its process's wall time."""
        found = self.info.get("sampling_seconds")
        if isinstance(found, int | float) and not isinstance(found, bool) and np.isfinite(found):
            return float(found)
        return self.wall_s


#: How a cell or a reference ended, in words.
STATUS_WORDS = {"failed": "failed", "timeout": "timed out", "diverged": "diverged"}
#: What computes a reference that failed or timed out again: the next sweep, or one with
#: ``--rerun-failed`` (the runner's ``rerun_failed``) where a sweep keeps the failure.
REFERENCE_RETRY = "run again to retry it (with --rerun-failed after repeated failures)"


def reference_failure(entries: Sequence[ReferenceEntry]) -> str | None:
    """``"the reference failed (split 0: WorkerCrashed: ...)"``: the references that were
    attempted and gave no fit (failed or timed out, unlike an infeasible one, not attempted on
    purpose), with the first line of each split's cause; None where there are none."""
    ended = [e for e in entries if e.status in FAILED]
    if not ended:
        return None
    verb = STATUS_WORDS["timeout" if all(e.status == "timeout" for e in ended) else "failed"]
    causes = "; ".join(
        f"split {e.split}: {first_line(e.note) or STATUS_WORDS[e.status]}" for e in ended
    )
    return f"the reference {verb} ({causes})"


def references_pass(entries: Sequence[ReferenceEntry]) -> bool:
    """Whether fidelity to a dataset's references counts (ranks, decides, is on the Summary's
    front): it has a reference with predictions and every such reference passed its gate, i.e.
    has a floor (a split whose reference is infeasible contributes nothing). A reference without
    a floor ranks nothing; its distances are shown apart, marked as not ranked."""
    usable = [e for e in entries if e.usable]
    return bool(usable) and all(e.passed for e in usable)


def _earlier_format(folder: Path) -> Any:
    """The ``format`` of a ``reference.json`` that parses but is not of
    :data:`~ppl_bnn.reference.FORMAT`, else None."""
    try:
        data = json.loads((folder / REFERENCE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and data.get("format", 1) != REFERENCE_FORMAT:
        return data.get("format", 1)
    return None


def _reference_info(folder: Path) -> dict[str, Any]:
    """What a reference's ``record.json`` says of its chains: why it stopped adding chains, its
    sampling seconds and the chains it dropped ({} where the record is missing or unreadable:
    the report then says less, never fails)."""
    try:
        record = json.loads((folder / RECORD_FILE).read_text())
        info = record.get("info") or {}
        chains = info.get("chains") or {}
        dropped = chains.get("dropped") or {}
        return {
            "stopped": info.get("stopped"),
            "sampling_seconds": info.get("sampling_seconds"),
            "dropped": {str(k): str(v) for k, v in dict(dropped).items()},
        }
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def read_references(
    results_dir: Path, problems: list[str] | None = None
) -> dict[tuple[str, int], ReferenceEntry]:
    """Every ``references/*/reference.json`` under ``results_dir``, by (dataset, split);
    unreadable ones, and those of an earlier format (counted as missing), are left out and
    added to ``problems``."""
    out: dict[tuple[str, int], ReferenceEntry] = {}
    for folder in sorted(
        p.parent for p in (results_dir / REFERENCES_DIR).glob(f"*/{REFERENCE_FILE}")
    ):
        data = read_reference(folder)
        if data is None and (earlier := _earlier_format(folder)) is not None:
            logger.warning("reference %s is of format %s: left out", folder.name, earlier)
            if problems is not None:
                problems.append(
                    f"{REFERENCES_DIR}/{folder.name}/{REFERENCE_FILE} is of an earlier format "
                    f"({earlier}, not {REFERENCE_FORMAT}): it is left out, as if there were no "
                    "reference; `ppl-bnn bench` computes it again"
                )
            continue
        try:
            entry = ReferenceEntry(
                dataset=str(data["dataset"]),
                split=int(data["split"]),
                status=str(data["status"]),
                passed=data.get("passed"),
                note=data.get("note"),
                gate=dict(data.get("gate") or {}),
                diagnostics=dict(data.get("diagnostics") or {}),
                settings=dict(data.get("settings") or {}),
                wall_s=data.get("wall_s"),
                folder=folder,
                info=_reference_info(folder),
            )
        except (ValueError, KeyError, TypeError) as err:
            logger.warning("cannot read the reference in %s: %s", folder, err)
            if problems is not None:
                problems.append(
                    f"{REFERENCES_DIR}/{folder.name}/{REFERENCE_FILE} is unreadable "
                    f"({type(err).__name__}: {err}): the comparisons with this reference are "
                    "missing"
                )
            continue
        reason = netcdf_problem(folder / PREDICTIONS_FILE) if entry.status in COMPLETE else None
        if reason is not None:
            logger.warning("reference %s: %s %s", folder.name, PREDICTIONS_FILE, reason)
            if problems is not None:
                problems.append(
                    f"{REFERENCES_DIR}/{folder.name}/{PREDICTIONS_FILE} {reason}: the fidelity "
                    "numbers and the reference band of this dataset are missing; `ppl-bnn bench` "
                    "computes the reference again"
                )
            continue
        out[(entry.dataset, entry.split)] = entry
    return out
