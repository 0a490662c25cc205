"""MNIST and Fashion-MNIST from their original gzipped IDX files.

IDX format (LeCun et al., yann.lecun.com/exdb/mnist): a big-endian header, then raw bytes. The
header is a uint32 magic number -- two zero bytes, a type code (0x08: unsigned byte) and the number
of dimensions -- followed by one uint32 size per dimension. Images: magic 2051 (0x00000803),
sizes (count, rows, cols); labels: magic 2049 (0x00000801), size (count).

Files: ``<data_dir>/<group>/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz`` for group
``mnist`` or ``fashion-mnist``.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from ppl_bnn.data.checksums import verify_file
from ppl_bnn.data.errors import corrupt, not_found
from ppl_bnn.data.prepare import RawData

IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049
PIXEL_MAX = 255.0
NUM_CLASSES = 10

#: The OOD set of each group: the other group's test images.
OOD_GROUP = {"mnist": "fashion-mnist", "fashion-mnist": "mnist"}

SOURCES = {
    "mnist": "MNIST (LeCun, Cortes & Burges), yann.lecun.com/exdb/mnist",
    "fashion-mnist": "Fashion-MNIST (Xiao, Rasul & Vollgraf 2017), "
    "github.com/zalandoresearch/fashion-mnist",
}


def parse_idx(raw: bytes, expected_magic: int) -> tuple[np.ndarray | None, str]:
    """Decode an uncompressed IDX byte string of unsigned bytes.

    Args:
        raw: the whole file content.
        expected_magic: :data:`IMAGES_MAGIC` or :data:`LABELS_MAGIC`.

    Returns:
        ``(array, "")`` with the array shaped by the header's sizes, or ``(None, reason)`` when
        the magic number or the length does not match.
    """
    if len(raw) < 4:
        return None, f"{len(raw)} bytes is too short for an IDX header"
    magic = int.from_bytes(raw[:4], "big")
    if magic != expected_magic:
        return None, f"IDX magic number is {magic}, expected {expected_magic}"
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    if len(raw) < header:
        return None, f"{len(raw)} bytes is too short for an IDX header of {ndim} sizes"
    shape = tuple(int(s) for s in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    expected = header + int(np.prod(shape))
    if len(raw) != expected:
        return None, f"IDX header {shape} implies {expected} bytes, the file has {len(raw)}"
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape), ""


def read_idx_gz(
    path: Path, rel: str, expected_magic: int, group: str, data_dir: Path
) -> np.ndarray:
    """Read, verify and decode one gzipped IDX file of ``group``."""
    if not path.is_file():
        raise not_found(path, group, data_dir, what=f"data set {group!r}")
    verify_file(path, rel, data_dir)
    try:
        with gzip.open(path, "rb") as handle:
            raw = handle.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise corrupt(path, f"cannot decompress it ({exc})", group, data_dir) from exc
    array, reason = parse_idx(raw, expected_magic)
    if array is None:
        raise corrupt(path, reason, group, data_dir)
    return array


def read_part(group: str, part: str, data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """Images ``(n, 784)`` uint8 and labels ``(n,)`` uint8 of ``part`` ("train" or "t10k")."""
    files = {}
    for kind, magic in (("images-idx3", IMAGES_MAGIC), ("labels-idx1", LABELS_MAGIC)):
        rel = f"{group}/{part}-{kind}-ubyte.gz"
        files[kind] = (data_dir / rel, read_idx_gz(data_dir / rel, rel, magic, group, data_dir))
    images_path, images = files["images-idx3"]
    labels_path, labels = files["labels-idx1"]
    if images.ndim != 3 or labels.ndim != 1:
        raise corrupt(
            images_path, f"unexpected IDX shapes {images.shape} / {labels.shape}", group, data_dir
        )
    if len(images) != len(labels):
        raise corrupt(
            labels_path,
            f"{len(labels)} labels for {len(images)} images in {images_path.name}",
            group,
            data_dir,
        )
    if labels.size and labels.max() >= NUM_CLASSES:
        raise corrupt(labels_path, f"label {labels.max()} is not a class 0..9", group, data_dir)
    return images.reshape(len(images), -1), labels


def load(group: str, data_dir: Path) -> RawData:
    """The standard train/test split of ``group``, with the other group's test images as OOD.

    Raises:
        DatasetNotFoundError: a file of ``group`` or of its OOD group is missing.
        DatasetCorruptError: a file fails its checksum, does not decompress, or has a bad header.
    """
    ood_group = OOD_GROUP[group]
    ood_rel = f"{ood_group}/t10k-images-idx3-ubyte.gz"
    needed = [
        (f"{group}/{part}-{kind}-ubyte.gz", group)
        for part in ("train", "t10k")
        for kind in ("images-idx3", "labels-idx1")
    ]
    for rel, owner in [*needed, (ood_rel, ood_group)]:
        if not (data_dir / rel).is_file():
            raise not_found(data_dir / rel, owner, data_dir, what=f"data set {group!r}")
    x_train, y_train = read_part(group, "train", data_dir)
    x_test, y_test = read_part(group, "t10k", data_dir)
    x_ood = read_idx_gz(data_dir / ood_rel, ood_rel, IMAGES_MAGIC, ood_group, data_dir)
    return RawData(
        task="classification",
        x_train=x_train,
        y_train=y_train.astype(np.int64),
        x_test=x_test,
        y_test=y_test.astype(np.int64),
        num_classes=NUM_CLASSES,
        pixel_max=PIXEL_MAX,
        x_ood=x_ood.reshape(len(x_ood), -1),
        ood_name=ood_group,
        source=f"{SOURCES[group]}; {data_dir / group}",
        image_shape=(*x_ood.shape[1:], 1),
    )
