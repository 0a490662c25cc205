"""A suite's data files: parsing, cells keyed by the file's content, split rows beside the
results, and every bad-data path named by file, column and row before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ppl_bnn.bench.data_files import DATA_DIR, arrays_data_file, write_split_rows
from ppl_bnn.bench.suite import SuiteError, load_suite, parse_suite
from ppl_bnn.data import load_dataset


def _csv(path: Path, rows: int = 40, *, labels: bool = False, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=rows), rng.normal(size=rows)
    y = [("yes" if v > 0 else "no") for v in a] if labels else list(a - 2 * b)
    lines = ["a,b,y", *(f"{u},{v},{w}" for u, v, w in zip(a, b, y, strict=True))]
    path.write_text("\n".join(lines) + "\n")
    return path


def _raw(dataset: dict, **changes: object) -> dict:
    raw = {
        "name": "mine",
        "backends": ["numpyro"],
        "model": {"hidden": [4]},
        "datasets": [dataset],
        "methods": {"map": {"num_steps": 20}},
    }
    raw.update(changes)
    return raw


def test_a_data_file_expands_into_cells_keyed_by_its_content(tmp_path: Path) -> None:
    path = _csv(tmp_path / "prices.csv")
    raw = _raw({"name": "prices", "path": str(path), "target": "y", "splits": 3})
    suite = parse_suite(raw)
    cells = suite.cells()
    assert [c.split for c in cells] == [0, 1, 2]
    file = cells[0].data["file"]
    assert file["path"] == str(path.resolve()) and file["target"] == "y"
    assert file["task"] == "regression" and file["test_fraction"] == 0.1
    assert len(file["sha256"]) == 64
    # The cell loads the split the suite read, standardised like any other set.
    data = load_dataset(cells[1].dataset, split=1, **cells[1].data)
    assert (data.n_train, data.n_test) == (36, 4) and data.task == "regression"
    assert abs(data.y_train.mean()) < 1e-12
    # One byte more changes every cell's config hash: a changed file reruns its cells.
    before = {c.cell_id: c.config_hash() for c in cells}
    path.write_text(path.read_text() + "0.5,0.5,0.5\n")
    after = {c.cell_id: c.config_hash() for c in parse_suite(raw).cells()}
    assert before.keys() == after.keys()
    assert all(before[k] != after[k] for k in before)
    # ... and a cell of the old suite refuses the changed file instead of mixing results.
    with pytest.raises(ValueError, match=r"prices\.csv has changed since it was read"):
        load_dataset(cells[0].dataset, split=0, **cells[0].data)


def test_a_moved_file_keeps_its_cells(tmp_path: Path) -> None:
    """A cell's config holds the file's content hash, not where it lies."""
    first = _csv(tmp_path / "prices.csv")
    moved = tmp_path / "elsewhere.csv"
    moved.write_bytes(first.read_bytes())

    def hashes(path: Path) -> list[str]:
        suite = parse_suite(_raw({"name": "p", "path": str(path), "target": "y"}))
        return [c.config_hash() for c in suite.cells()]

    assert hashes(first) == hashes(moved)


def test_paths_are_read_from_the_suite_files_folder(tmp_path: Path) -> None:
    folder = tmp_path / "study"
    folder.mkdir()
    _csv(folder / "train.csv", labels=True)
    _csv(folder / "test.csv", rows=10, labels=True, seed=1)
    (folder / "mine.toml").write_text(
        'name = "mine"\nbackends = ["numpyro"]\n[model]\nhidden = [4]\n'
        '[[datasets]]\nname = "votes"\npath = "train.csv"\ntarget = "y"\n'
        'test_path = "test.csv"\n[methods.map]\nnum_steps = 20\n'
    )
    suite = load_suite(folder / "mine.toml")
    (cell,) = suite.cells()
    assert cell.data["file"]["test_path"] == str((folder / "test.csv").resolve())
    data = load_dataset(cell.dataset, split=0, **cell.data)
    assert data.task == "classification" and data.num_classes == 2
    assert (data.n_train, data.n_test) == (40, 10)


def test_split_rows_are_written_with_the_results(tmp_path: Path) -> None:
    path = _csv(tmp_path / "prices.csv")
    suite = parse_suite(_raw({"name": "prices", "path": str(path), "target": "y", "splits": 2}))
    written = write_split_rows(tmp_path / "results", suite.datasets[0].data_file)
    assert written == tmp_path / "results" / DATA_DIR / "prices.json"
    stored = json.loads(written.read_text())
    assert [s["split"] for s in stored["splits"]] == [0, 1]
    for split in stored["splits"]:
        rows = sorted(split["train_rows"] + split["test_rows"])
        assert rows == list(range(40)) and len(split["test_rows"]) == 4
    assert stored["splits"][0]["test_rows"] != stored["splits"][1]["test_rows"]


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("a,b,y\n1,2,3\n1,x,4\n2,3,5\n", r"bad\.csv: column 'b', row 2: not a number: 'x'"),
        ("a,b,y\n1,2,3\n1,,4\n2,3,5\n", r"bad\.csv: column 'b', row 2: missing value"),
        ("a,b,y\n1,2,3\n1,2,\n2,3,5\n", r"bad\.csv: column 'y', row 2: missing value"),
        ("a,b,y\n1,2,3.5\n2,2,3.5\n2,3,3.5\n", r"bad\.csv: .*constant target"),
        ("a,b,y\n1,2,u\n2,2,u\n2,3,u\n", r"bad\.csv: .*single class"),
        ("a,b,z\n1,2,3\n2,2,4\n2,3,5\n", r"bad\.csv: .*'y'.*columns.*'a', 'b', 'z'"),
        ("", r"bad\.csv.*no rows"),
        ("a,b,y\n", r"bad\.csv.*no rows"),
    ],
    ids=[
        "non-numeric",
        "missing-feature",
        "missing-target",
        "constant",
        "one-class",
        "no-target",
        "empty",
        "header-only",
    ],
)
def test_bad_data_is_named_by_file_column_and_row(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(SuiteError, match=r"\[\[datasets\]\] #1: .*" + match):
        parse_suite(_raw({"name": "bad", "path": str(path), "target": "y"}))


@pytest.mark.parametrize(
    ("dataset", "match"),
    [
        ({"name": "sine", "path": "x.csv", "target": "y"}, "'sine' is a catalogue data set"),
        ({"name": "a b", "path": "x.csv", "target": "y"}, "a data file's name must be"),
        ({"name": "mine", "target": "y"}, r"\['target'\] describe a data file, which needs path"),
        ({"name": "mine", "path": "x.csv", "splits": 0}, "positive integer"),
        ({"name": "mine", "path": "x.csv", "splits": [0, 1]}, "positive integer"),
        ({"name": "mine", "path": "x.csv", "test_fraction": 1.5}, "test_fraction"),
        (
            {"name": "mine", "path": "x.csv", "test_path": "x.csv", "test_fraction": 0.2},
            "test_fraction or test_path, not both",
        ),
        (
            {"name": "mine", "path": "x.csv", "test_path": "x.csv", "splits": 2},
            "with test_path there is one split",
        ),
        ({"name": "mine", "path": "missing.csv", "target": "y"}, r"missing\.csv"),
    ],
)
def test_bad_data_file_tables_are_refused(tmp_path: Path, dataset: dict, match: str) -> None:
    _csv(tmp_path / "x.csv")
    dataset = {**dataset, **({"path": str(tmp_path / dataset["path"])} if "path" in dataset
                             else {})}  # fmt: skip
    if "test_path" in dataset:
        dataset["test_path"] = str(tmp_path / dataset["test_path"])
    with pytest.raises(SuiteError, match=match):
        parse_suite(_raw(dataset))


@pytest.mark.parametrize("labels", [False, True])
@pytest.mark.parametrize("held_out", [False, True])
def test_data_made_in_memory_is_the_data_file_read_from_its_bytes(
    tmp_path: Path, labels: bool, held_out: bool
) -> None:
    """``compare``'s data, made in memory, is the data file a suite would read from the bytes
    it writes: its cells keep their config hash, and the loader reads back the arrays."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 3)).astype(np.float32)
    y = np.arange(30) % 3 if labels else (x[:, 0] - x[:, 1]).astype(np.float32)
    arrays = {"x": x, "y": y, "names": np.array(["a", "b", "c"])}
    test = {**arrays, "x": x[:6], "y": y[:6]} if held_out else None
    path = tmp_path / "data" / "mine.npz"
    made, files = arrays_data_file(
        "mine", path, arrays, test, num_classes=3 if labels else None,
        test_fraction=None if held_out else 0.2, splits=1 if held_out else 2,
    )  # fmt: skip
    for where, data in files.items():
        where.parent.mkdir(exist_ok=True)
        where.write_bytes(data)
    dataset = {"name": "mine", "path": str(path), "target": "y"}
    if labels:
        dataset.update(task="classification", classes=["0", "1", "2"])
    if held_out:
        dataset["test_path"] = str(tmp_path / "data" / "mine-test.npz")
    else:
        dataset.update(test_fraction=0.2, splits=2)
    (entry,) = parse_suite(_raw(dataset)).datasets
    assert made == entry.data_file
    loaded = load_dataset("mine", split=made.splits - 1, **{"file": made.loader_keywords()})
    assert loaded.x_train.shape[1] == 3 and loaded.task == made.task


def test_images_made_in_memory_load_as_images(tmp_path: Path) -> None:
    x = np.random.default_rng(2).random((20, 4, 4, 1)).astype(np.float32)
    made, files = arrays_data_file(
        "pics", tmp_path / "pics.npz", {"x": x, "y": np.arange(20) % 2}, None,
        num_classes=2, test_fraction=0.25, splits=1,
    )  # fmt: skip
    assert made.image_shape == (4, 4, 1)
    (tmp_path / "pics.npz").write_bytes(files[tmp_path / "pics.npz"])
    loaded = load_dataset("pics", image=True, file=made.loader_keywords())
    assert loaded.x_train.shape[1:] == loaded.x_test.shape[1:] == (4, 4, 1)
    assert len(loaded.x_train) + len(loaded.x_test) == 20
