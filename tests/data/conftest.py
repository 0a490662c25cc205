"""Fixtures for the data tests: the shared data directory and writable copies of parts of it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

#: The repository's sibling ``shared/data`` (``<repo>/../shared/data``).
DEFAULT_SHARED_DATA = Path(__file__).parents[2].parent / "shared" / "data"


def copy_tree(src: Path, dst: Path) -> Path:
    """Copy the files under ``src`` to ``dst`` as writable files (the shared copy is read-only)."""
    for path in sorted(src.rglob("*")):
        if path.is_file():
            target = dst / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return dst


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data directory: ``$PPL_BNN_DATA``, else the repository's ``../shared/data``."""
    root = Path(os.environ.get("PPL_BNN_DATA") or DEFAULT_SHARED_DATA)
    if not root.is_dir():
        pytest.skip(f"real data directory {root} is absent (set PPL_BNN_DATA to a data directory)")
    return root


@pytest.fixture(scope="session")
def uci_data(shared_data: Path) -> Path:
    """The real data directory, skipping when it holds no UCI sets."""
    if not (shared_data / "uci" / "bostonHousing" / "data").is_dir():
        pytest.skip(f"{shared_data} holds no uci/bostonHousing/data")
    return shared_data


@pytest.fixture(scope="session")
def mnist_data(shared_data: Path) -> Path:
    """The real data directory, skipping when it lacks MNIST or Fashion-MNIST."""
    for group in ("mnist", "fashion-mnist"):
        if not (shared_data / group / "train-images-idx3-ubyte.gz").is_file():
            pytest.skip(f"{shared_data} holds no {group}/ IDX files")
    return shared_data


@pytest.fixture
def boston_copy(uci_data: Path, tmp_path: Path) -> Path:
    """A writable data directory holding only ``uci/bostonHousing``."""
    rel = Path("uci") / "bostonHousing"
    copy_tree(uci_data / rel, tmp_path / "data" / rel)
    return tmp_path / "data"
