"""``fetch`` against a local HTTP server serving a copy of the shared data."""

from __future__ import annotations

import functools
import gc
import re
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from ppl_bnn.data import DatasetCorruptError, DatasetFetchError, fetch, load_dataset
from ppl_bnn.data.checksums import group_files

from .conftest import copy_tree


class QuietHandler(SimpleHTTPRequestHandler):
    """Serves files without logging each request to stderr."""

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(base URL, folder it serves): a server on 127.0.0.1 with a free port, in a thread."""
    root = tmp_path / "served"
    root.mkdir()
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(root))
    )
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        gc.collect()  # any unclosed client socket warns here, in the test that leaked it


def leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith(".part")]


def test_fetch_uci_group_then_refetch_is_a_no_op(
    served: tuple[str, Path], uci_data: Path, tmp_path: Path
) -> None:
    base, root = served
    copy_tree(uci_data / "uci", root / "uci")
    target = tmp_path / "data"
    written = fetch("uci", f"{base}/uci/", target)
    assert len(written) == len(group_files("uci")) == 306
    assert sorted(written) == sorted(target / rel for rel in group_files("uci"))
    assert not leftovers(target)
    ds = load_dataset("wine-quality-red", split=4, data_dir=target)
    ref = load_dataset("wine-quality-red", split=4, data_dir=uci_data)
    np.testing.assert_array_equal(ds.x_train, ref.x_train)

    # Everything present and correct: nothing is downloaded again.
    data = target / "uci" / "concrete" / "data" / "data.txt"
    mtime = data.stat().st_mtime_ns
    assert fetch("uci", f"{base}/uci", target) == []
    assert data.stat().st_mtime_ns == mtime

    # A damaged local file is replaced.
    data.write_text("damaged\n")
    assert fetch("uci", f"{base}/uci", target) == [data]
    assert data.read_bytes() == (uci_data / "uci" / "concrete" / "data" / "data.txt").read_bytes()


def test_tampered_download_leaves_nothing_behind(
    served: tuple[str, Path], uci_data: Path, tmp_path: Path
) -> None:
    base, root = served
    rel = "bostonHousing/data/index_features.txt"
    (root / "uci" / rel).parent.mkdir(parents=True)
    (root / "uci" / rel).write_text("0\n1\n")
    target = tmp_path / "data"
    bad = target / "uci" / rel
    url = f"{base}/uci/{rel}"
    # Manifest order: data.txt, dropout_rates.txt, index_features.txt; serve good copies first.
    for name in ("data.txt", "dropout_rates.txt"):
        (root / "uci" / "bostonHousing" / "data" / name).write_bytes(
            (uci_data / "uci" / "bostonHousing" / "data" / name).read_bytes()
        )
    with pytest.raises(DatasetCorruptError, match=re.escape(str(bad)) + ".*SHA-256") as info:
        fetch("uci", f"{base}/uci", target)
    assert url in str(info.value)
    assert not bad.exists() and not leftovers(target)
    assert (target / "uci" / "bostonHousing" / "data" / "data.txt").is_file()


def test_http_error_names_the_url(served: tuple[str, Path], tmp_path: Path) -> None:
    base, _ = served
    with pytest.raises(DatasetFetchError, match=re.escape(f"{base}/mnist/") + ".*HTTP 404") as info:
        fetch("mnist", f"{base}/mnist", tmp_path / "data")
    assert info.value.url is not None and info.value.url.startswith(f"{base}/mnist/")
    assert not leftovers(tmp_path)


def test_fetch_from_a_file_url(mnist_data: Path, tmp_path: Path) -> None:
    written = fetch("mnist", (mnist_data / "mnist").as_uri(), tmp_path)
    assert sorted(p.name for p in written) == sorted(
        [
            "train-images-idx3-ubyte.gz",
            "train-labels-idx1-ubyte.gz",
            "t10k-images-idx3-ubyte.gz",
            "t10k-labels-idx1-ubyte.gz",
        ]
    )


@pytest.mark.parametrize(
    ("group", "url", "message"),
    [
        ("cifar", "http://127.0.0.1/x", "unknown data group 'cifar'"),
        ("uci", "ftp://example.org/uci", "url must start with one of http://, https://, file://"),
    ],
)
def test_fetch_argument_errors(group: str, url: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=message):
        fetch(group, url, tmp_path)
