"""A part of the report computed in a second process while this one builds the rest.

The report is built in one process, on one core. Its slowest table that needs nothing else of
the build, the PSIS-LOO comparison (:func:`ppl_bnn.report.stats.loo_compare`), runs in a new
interpreter that loads the same results folder, so that a second core works on it while the
figures are drawn. A new interpreter (``spawn``), not a fork:
the results' netCDF files are open in this one, and HDF5 handles must not cross a fork. It
does not import the user's script (:mod:`ppl_bnn.processes`): one that renders a report
without a ``__main__`` guard runs once.
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

from ppl_bnn.processes import without_main_module

if TYPE_CHECKING:
    from ppl_bnn.report.load import SuiteResults

logger = logging.getLogger(__name__)


def _of_folder(name: str, results_dir: str, cell_ids: list[str]) -> Any:
    """``name``'s table of the cells ``cell_ids`` in ``results_dir`` (run in the second
    process; a sweep may have written more cells since the first process read the folder)."""
    from ppl_bnn.report import stats
    from ppl_bnn.report.load import load_results

    results = load_results(results_dir)
    results.cells = results.cells[results.cells["cell_id"].isin(cell_ids)]
    return getattr(stats, name)(results)


class Background:
    """``ppl_bnn.report.stats.<name>`` of ``results``, computed from its folder in a new process
    started now; :meth:`result` waits for it. Where the process cannot start or dies,
    :meth:`result` computes it here instead, with ``fallback``."""

    def __init__(self, name: str, results: SuiteResults, fallback: Callable[[], Any]) -> None:
        self.name = name
        self.fallback = fallback
        self._executor: ProcessPoolExecutor | None = None
        self._future: Future | None = None
        try:
            self._executor = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
            cell_ids = results.cells["cell_id"].tolist() if not results.cells.empty else []
            with without_main_module():  # the process starts in submit
                self._future = self._executor.submit(
                    _of_folder, name, str(results.results_dir), cell_ids
                )
        except (OSError, RuntimeError) as err:
            logger.info("report: %s in this process (%s)", name, err)
            self.close()

    def result(self) -> Any:
        """The table; an error raised by the computation itself is raised here."""
        if self._future is None:
            return self.fallback()
        try:
            return self._future.result()
        except (OSError, RuntimeError) as err:  # BrokenProcessPool is a RuntimeError
            logger.info("report: %s's process failed (%s); computing it here", self.name, err)
            return self.fallback()
        finally:
            self.close()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(cancel_futures=True)
        self._executor, self._future = None, None
