"""Installing a cell's or reference's staging folder, readable by every user.

Staging folders, their owners and their clean-up are :mod:`ppl_bnn.files`'s
(:func:`~ppl_bnn.files.staging_dir`, :func:`~ppl_bnn.files.replace_dir`,
:func:`~ppl_bnn.files.clean_staging`). What the benchmark adds: results folders are shared, with
Dask workers and colleagues that may run as other users, so an installed folder is made
readable by all (folders 0755, files 0644) whatever the umask and the 0600 of the temporary
files its files were written through.
"""

from __future__ import annotations

import os
from pathlib import Path

from ppl_bnn.files import replace_dir

DIR_MODE = 0o755
FILE_MODE = 0o644


def share(path: Path) -> None:
    """Make the folder ``path`` and everything in it readable by all: folders 0755, files 0644."""
    path.chmod(DIR_MODE)
    for root, dirs, files in os.walk(path):
        for name in dirs:
            Path(root, name).chmod(DIR_MODE)
        for name in files:
            Path(root, name).chmod(FILE_MODE)


def install(staging: Path, final: Path) -> None:
    """Put ``staging`` (made readable by all) in the place of ``final`` in one step."""
    share(staging)
    replace_dir(staging, final)
