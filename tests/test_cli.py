"""The ``ppl-bnn`` command: argument handling, errors, and data fetch wiring."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from ppl_bnn.cli import build_parser, main
from tests.data.conftest import DEFAULT_SHARED_DATA


def test_report_without_results(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        assert main(["report", "--reports-dir", str(tmp_path)]) == 2
    assert "no stored results" in caplog.text and "ppl-bnn bench --suite default" in caplog.text


def test_unknown_suite(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        assert main(["bench", "--suite", "nope"]) == 2
    assert "unknown suite 'nope'" in caplog.text


def test_bad_arguments() -> None:
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["data", "fetch", "cifar", "--url", "http://x"])
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "--jobs", "two"])


def test_fetch_from_an_unreachable_url(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    args = ["data", "fetch", "uci", "--url", "http://127.0.0.1:9/uci", "--data-dir", str(tmp_path)]
    with caplog.at_level(logging.ERROR):
        assert main(args) == 2
    assert "127.0.0.1:9" in caplog.text


def test_fetch_verifies_and_is_idempotent(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = Path(os.environ.get("PPL_BNN_DATA") or DEFAULT_SHARED_DATA) / "uci"
    if not source.is_dir():
        pytest.skip(f"{source} is absent: no local copy of the UCI data to fetch from")
    args = ["data", "fetch", "uci", "--url", source.as_uri(), "--data-dir", str(tmp_path)]
    with caplog.at_level(logging.INFO):
        assert main(args) == 0
        assert main(args) == 0
    assert "uci: 0 files downloaded" in caplog.text
    assert (tmp_path / "uci" / "bostonHousing" / "data" / "data.txt").is_file()
