"""A dataset's figures kept between renders of the same results folder.

Drawing the figures takes most of a report's time, and a sweep renders its report many times
(:mod:`ppl_bnn.report.live`). Datasets run one after another, so by the render after the sweep
every dataset but the last has had all its cells for several renders. Each dataset figure is
kept in the results folder (:data:`MEMO_DIR`), keyed by everything it is drawn from: the
dataset's rows of the cells frame (records, metrics and fidelity), the size and modification
time of every file of its cells and of its references, what ``suite.json`` says of the suite
(:data:`SUITE_KEYS`, not the runs a sweep appends at its end),
and the source of the report and metrics code and matplotlib's version. A figure whose key is
unchanged is read back instead of drawn; any change draws it again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path

import matplotlib

from ppl_bnn import metrics
from ppl_bnn.keys import source_key
from ppl_bnn.report.document import Figure
from ppl_bnn.report.load import SuiteResults
from ppl_bnn.report.memo import CACHE_DIR, folder_key, keep

logger = logging.getLogger(__name__)

#: Where a results folder keeps its figures (relative to the folder).
MEMO_DIR = CACHE_DIR / "figures"
#: The parts of ``suite.json`` a key holds.
SUITE_KEYS = ("name", "kind", "description", "reference", "cells", "configs")


def _code_key() -> str:
    """The report and metrics packages' source and matplotlib's version."""
    packages = (Path(__file__).parent, Path(metrics.__file__).parent)
    return source_key(
        (path for package in packages for path in sorted(package.glob("*.py"))),
        matplotlib.__version__,
    )


class FigureMemo:
    """The figures of earlier renders of ``results``'s folder; :meth:`draw` reads one back or
    draws it, and :meth:`save` keeps this render's and forgets the rest."""

    def __init__(self, results: SuiteResults) -> None:
        self.results = results
        self.folder = results.results_dir / MEMO_DIR
        self._code = _code_key()
        # What suite.json says of the suite, not what each sweep adds to it (its environment,
        # wall time and runs), which changes at the end of every sweep.
        suite = {k: results.suite.get(k) for k in SUITE_KEYS}
        self._suite = json.dumps(suite, sort_keys=True, default=str)
        self._dataset_keys: dict[str, str] = {}
        self.used: set[str] = set()
        self.drawn = self.read = 0

    def _dataset_key(self, dataset: str) -> str:
        if dataset not in self._dataset_keys:
            cells = self.results.cells
            rows = cells[cells["dataset"] == dataset]
            root = self.results.results_dir
            files = [(c, folder_key(root / "cells" / c)) for c in rows["cell_id"]]
            references = [
                (entry.folder.name, folder_key(entry.folder))
                for (name, _), entry in sorted(self.results.references.items())
                if name == dataset
            ]
            parts = [self._code, self._suite, rows.to_csv(index=False), files, references]
            text = json.dumps(parts, default=str)
            self._dataset_keys[dataset] = hashlib.sha256(text.encode()).hexdigest()
        return self._dataset_keys[dataset]

    def draw(
        self, draw: Callable[[SuiteResults, str], Figure | None], dataset: str
    ) -> Figure | None:
        """``draw(results, dataset)``, or the same figure kept by an earlier render."""
        name = hashlib.sha256(
            f"{self._dataset_key(dataset)} {draw.__module__}.{draw.__qualname__} {dataset}".encode()
        ).hexdigest()[:32]
        path = self.folder / f"{name}.json"
        self.used.add(path.name)
        try:
            stored = json.loads(path.read_text())
            self.read += 1
            if stored is None:
                return None
            return Figure(stored["name"], base64.b64decode(stored["png"]), stored["caption"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        figure = draw(self.results, dataset)
        self.drawn += 1
        stored = None
        if figure is not None:
            png = base64.b64encode(figure.png).decode()
            stored = {"name": figure.name, "png": png, "caption": figure.caption}
        keep(path, json.dumps(stored), "figure memo")
        return figure

    def save(self) -> None:
        """Forget the figures this render did not use (of cells since rerun or removed)."""
        if not self.folder.is_dir():
            return
        for path in self.folder.glob("*.json"):
            if path.name not in self.used:
                path.unlink(missing_ok=True)
        logger.debug("figure memo: %d drawn, %d read back", self.drawn, self.read)
