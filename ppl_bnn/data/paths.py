"""Where the data directory is: an argument, else ``$PPL_BNN_DATA``, else a per-user cache."""

from __future__ import annotations

import os
from pathlib import Path

#: Environment variable naming the data directory.
ENV_VAR = "PPL_BNN_DATA"

#: Used when neither an argument nor ``$PPL_BNN_DATA`` names a directory.
DEFAULT_DATA_DIR = Path("~/.cache/ppl_bnn/data")


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The data directory to read from (or fetch into).

    Resolution order: ``data_dir`` if given, else the environment variable ``PPL_BNN_DATA`` if set
    and non-empty, else ``~/.cache/ppl_bnn/data``. ``~`` is expanded; the directory need not exist.

    Its layout: ``uci/<name>/data/`` (UCI sets with their splits), ``mnist/`` and
    ``fashion-mnist/`` (the original IDX ``.gz`` files).

    Args:
        data_dir: an explicit directory, or ``None``.

    Returns:
        The directory as an absolute :class:`~pathlib.Path`.
    """
    if data_dir is None:
        data_dir = os.environ.get(ENV_VAR) or DEFAULT_DATA_DIR
    return Path(data_dir).expanduser().absolute()
