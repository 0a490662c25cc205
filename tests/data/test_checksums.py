"""The SHA-256 manifest shipped with the package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ppl_bnn.data.checksums import group_files, manifest, sha256_file


def test_manifest_covers_the_three_groups() -> None:
    entries = manifest()
    assert len(entries) == 314
    assert len(group_files("uci")) == 306
    assert len(group_files("mnist")) == len(group_files("fashion-mnist")) == 4
    assert "uci/bostonHousing/data/data.txt" in entries
    assert all(re.fullmatch(r"[0-9a-f]{64}", digest) for digest in entries.values())
    with pytest.raises(ValueError, match=r"unknown data group 'cifar'.*uci, mnist, fashion-mnist"):
        group_files("cifar")


def test_manifest_matches_the_shared_readme(shared_data: Path) -> None:
    readme = shared_data / "README.md"
    if not readme.is_file():
        pytest.skip(f"{readme} is absent")
    listed = dict(
        (path, digest)
        for digest, path in re.findall(r"^([0-9a-f]{64})  \./(\S+)$", readme.read_text(), re.M)
    )
    assert listed == manifest()


def test_shared_files_match_a_few_manifest_entries(uci_data: Path) -> None:
    for rel in ("uci/wine-quality-red/data/data.txt", "uci/concrete/data/index_test_0.txt"):
        assert sha256_file(uci_data / rel) == manifest()[rel]
