"""MNIST / Fashion-MNIST: the IDX parser, the loaders, and their errors."""

from __future__ import annotations

import gzip
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from ppl_bnn.data import Dataset, DatasetCorruptError, DatasetNotFoundError, load_dataset
from ppl_bnn.data.idx import IMAGES_MAGIC, LABELS_MAGIC, parse_idx, read_idx_gz

MNIST_TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
MNIST_TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def idx_bytes(magic: int, shape: tuple[int, ...], payload: bytes | None = None) -> bytes:
    header = struct.pack(">I", magic) + struct.pack(f">{len(shape)}I", *shape)
    return header + (bytes(int(np.prod(shape))) if payload is None else payload)


def test_parse_idx_reads_the_big_endian_header() -> None:
    pixels = bytes(range(24))
    array, reason = parse_idx(idx_bytes(IMAGES_MAGIC, (2, 3, 4), pixels), IMAGES_MAGIC)
    assert reason == "" and array is not None
    assert array.shape == (2, 3, 4) and array.dtype == np.uint8 and array[1, 2, 3] == 23
    labels, _ = parse_idx(idx_bytes(LABELS_MAGIC, (5,)), LABELS_MAGIC)
    assert labels is not None and labels.shape == (5,)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (idx_bytes(LABELS_MAGIC, (5,)), "magic number is 2049, expected 2051"),
        (idx_bytes(IMAGES_MAGIC, (2, 3, 4))[:-1], r"implies 40 bytes, the file has 39"),
        (idx_bytes(IMAGES_MAGIC, (2, 3, 4)) + b"\0", r"implies 40 bytes, the file has 41"),
        (struct.pack(">I", IMAGES_MAGIC) + b"\0\0", "too short for an IDX header of 3 sizes"),
        (b"\0\0", "too short"),
    ],
)
def test_parse_idx_rejects_bad_headers(raw: bytes, message: str) -> None:
    array, reason = parse_idx(raw, IMAGES_MAGIC)
    assert array is None and re.search(message, reason), reason


def test_bad_magic_file_is_corrupt(tmp_path: Path) -> None:
    # A path the manifest does not list, so the parser (not the checksum) must catch it.
    path = tmp_path / "custom" / "images.gz"
    path.parent.mkdir()
    path.write_bytes(gzip.compress(idx_bytes(LABELS_MAGIC, (5,))))
    with pytest.raises(DatasetCorruptError, match=re.escape(str(path)) + ".*magic number is 2049"):
        read_idx_gz(path, "custom/images.gz", IMAGES_MAGIC, "mnist", tmp_path)
    path.write_bytes(b"not gzip at all")
    with pytest.raises(DatasetCorruptError, match="cannot decompress"):
        read_idx_gz(path, "custom/images.gz", IMAGES_MAGIC, "mnist", tmp_path)


@pytest.fixture(scope="module")
def mnist(mnist_data: Path) -> Dataset:
    return load_dataset("mnist", data_dir=mnist_data)


def test_mnist_shapes_labels_and_ood(mnist: Dataset) -> None:
    assert (mnist.n_train, mnist.n_test, mnist.input_dim) == (60000, 10000, 784)
    assert mnist.task == "classification" and mnist.num_classes == 10
    assert mnist.x_train.dtype == np.float64 and mnist.y_train.dtype == np.int64
    assert np.bincount(mnist.y_train).tolist() == MNIST_TRAIN_COUNTS
    assert np.bincount(mnist.y_test).tolist() == MNIST_TEST_COUNTS
    assert mnist.x_train.min() == 0.0 and mnist.x_train.max() == 1.0
    np.testing.assert_array_equal(mnist.x_std, 1.0)
    assert mnist.ood_name == "fashion-mnist" and mnist.x_ood is not None
    assert mnist.x_ood.shape == (10000, 784) and mnist.x_ood.max() == 1.0


def test_fashion_mnist_subset_with_mnist_ood(mnist_data: Path) -> None:
    ds = load_dataset("fashion-mnist", data_dir=mnist_data, max_train=600, max_test=100, seed=1)
    assert (ds.n_train, ds.n_test) == (600, 100)
    assert ds.ood_name == "mnist" and ds.x_ood is not None and ds.x_ood.shape == (100, 784)
    again = load_dataset("fashion-mnist", data_dir=mnist_data, max_train=600, max_test=100, seed=1)
    np.testing.assert_array_equal(ds.y_train, again.y_train)


def _mnist_copy(mnist_data: Path, root: Path, groups: tuple[str, ...]) -> Path:
    for group in groups:
        (root / group).mkdir(parents=True)
        for path in (mnist_data / group).glob("*.gz"):
            (root / group / path.name).symlink_to(path)
    return root


def test_missing_ood_group_is_not_found(mnist_data: Path, tmp_path: Path) -> None:
    root = _mnist_copy(mnist_data, tmp_path / "data", ("mnist",))
    missing = root / "fashion-mnist" / "t10k-images-idx3-ubyte.gz"
    with pytest.raises(DatasetNotFoundError, match=re.escape(str(missing))) as info:
        load_dataset("mnist", data_dir=root)
    assert "ppl-bnn data fetch fashion-mnist" in str(info.value)
    assert "zalandoresearch/fashion-mnist" in str(info.value)


def test_tampered_idx_file_fails_the_checksum(mnist_data: Path, tmp_path: Path) -> None:
    root = _mnist_copy(mnist_data, tmp_path / "data", ("mnist", "fashion-mnist"))
    labels = root / "mnist" / "t10k-labels-idx1-ubyte.gz"
    labels.unlink()
    labels.write_bytes(gzip.compress(idx_bytes(IMAGES_MAGIC, (1, 1, 1))))
    with pytest.raises(DatasetCorruptError, match=re.escape(str(labels)) + ".*SHA-256"):
        load_dataset("mnist", data_dir=root)
