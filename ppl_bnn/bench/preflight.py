"""What a suite's cells need that a machine may lack, checked before a sweep makes its results
folder or starts a process.

A network too large for the machine would otherwise fail in every cell's worker, after the
folder, the fork server and the workers had started, each cell recorded as failed. Here each
distinct (dataset, model, method, options) is checked once in the parent with
:func:`ppl_bnn.methods.memory.check_memory`, on the data of the first split it runs on (the
splits of a dataset have the same shapes, and sizes within a row or two). Data that does not
load is left to its cells, which record why.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ppl_bnn.bench.cell import Cell, model_arguments
from ppl_bnn.data import load_dataset
from ppl_bnn.methods import get_method, make_options
from ppl_bnn.methods.memory import check_memory
from ppl_bnn.model.bnn import BNN

logger = logging.getLogger(__name__)


def check_cells_memory(cells: Iterable[Any], data_dir: str | Path | None) -> None:
    """``InsufficientMemoryError`` naming the cell whose fit needs more memory than is
    available, at the least; performance probes (not :class:`Cell`) are not checked."""
    data: dict[str, Any] = {}
    checked: set[str] = set()
    for cell in cells:
        if not isinstance(cell, Cell):
            continue
        what = json.dumps([cell.dataset, cell.data, cell.model, cell.method, cell.backend,
                           cell.options], sort_keys=True, default=str)  # fmt: skip
        source = json.dumps([cell.dataset, cell.data], sort_keys=True, default=str)
        if what in checked:
            continue
        checked.add(what)
        if source not in data:
            try:
                data[source] = load_dataset(
                    cell.dataset, split=cell.split, data_dir=data_dir, **cell.data
                )
            except (OSError, ValueError) as err:  # the cells will record it
                logger.debug("%s: not checked before the sweep (%s)", cell.dataset, err)
                data[source] = None
        loaded = data[source]
        if loaded is None:
            continue
        model = BNN(loaded.x_train, loaded.y_train, **model_arguments(cell.model, loaded))
        options = make_options(get_method(cell.method, cell.backend), dict(cell.options),
                               backend=cell.backend)  # fmt: skip
        try:
            check_memory(cell.method, model.spec, options, loaded.n_train)
        except MemoryError as err:
            raise type(err)(f"{cell.cell_id}: {err}") from err
