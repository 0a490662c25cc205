"""A new user's first hour, as a notebook executed by a real Jupyter kernel (nbclient): compare on
a CSV with string labels and on a DataFrame with a numeric target, progress shown while it runs,
the verdict and a report figure shown inline, and the recommended fit predicting held-out rows in
the data's own units, as the report scored it.

It needs the notebook stack (nbclient, nbformat, ipykernel: the ``docs`` extra, so ``nox -s
docs`` runs it); elsewhere it skips, saying so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient", reason="the notebook test needs nbclient: nox -s docs")
nbformat = pytest.importorskip("nbformat", reason="the notebook test needs nbformat: nox -s docs")
pytest.importorskip("ipykernel", reason="the notebook test needs ipykernel: nox -s docs")

#: Short fits, two seeds: the point is what the user sees, not the posterior.
SETUP = """\
import json
import numpy as np
import pandas as pd
from sklearn.datasets import load_diabetes, load_iris
from ppl_bnn import BNN, compare

FAST = {"map": {"num_steps": 300}, "svi": {"num_steps": 300, "num_draws": 50}}
RUN = dict(methods=["map", "svi"], seeds=2, reference=False, options=FAST, jobs=1)
"""

IRIS = """\
iris = load_iris(as_frame=True)
flowers = iris.frame.drop(columns="target").assign(species=iris.target_names[iris.target])
flowers.to_csv("iris.csv", index=False)
table = pd.read_csv("iris.csv")
model = BNN(table.drop(columns="species"), table["species"], hidden=(8,))
flowers_cmp = compare(model, results_dir="iris-out", name="iris", **RUN)
flowers_cmp
"""

FIGURE = "flowers_cmp.figure()"

DIABETES = """\
frame = load_diabetes(as_frame=True).frame
train, held = frame.iloc[:380], frame.iloc[380:]
model = BNN(train.drop(columns="target"), train["target"], hidden=(8,))
patients = compare(model, test=(held.drop(columns="target"), held["target"]),
                   results_dir="diabetes-out", name="patients", **RUN)
best = patients.recommended
mine = best.predict(held.drop(columns="target")).mean
rmse = float(np.sqrt(np.mean((mine - held["target"].to_numpy()) ** 2)))
scored = patients.table
scored = scored[(scored["method"] == best.method) & (scored["backend"] == best.backend)]
print(json.dumps({"rmse": rmse, "report_rmse": float(scored["rmse"].mean())}))
"""


def _outputs(cell: dict) -> list[dict]:
    return cell.get("outputs", [])


def _texts(cell: dict, mime: str) -> str:
    return "".join("".join(out["data"].get(mime, "")) for out in _outputs(cell) if "data" in out)


def test_a_notebook_compares_shows_and_predicts(tmp_path: Path) -> None:
    cells = [nbformat.v4.new_code_cell(code) for code in (SETUP, IRIS, FIGURE, DIABETES)]
    notebook = nbformat.v4.new_notebook(cells=cells)
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    )
    client.execute()
    _, iris, figure, diabetes = notebook.cells

    # Progress while it ran: a widget, or a text bar's lines (no ipywidgets), and no warning.
    widget = _texts(iris, "application/vnd.jupyter.widget-view+json")
    streamed = "".join(
        out.get("text", "") for out in _outputs(iris) if out["output_type"] == "stream"
    )
    assert widget or re.search(r"\d+/\d+ \[", streamed), streamed  # tqdm's "2/4 [00:10<..."
    everything = "".join(out.get("text", "") for cell in notebook.cells for out in _outputs(cell))
    assert "IProgress not found" not in everything
    # The verdict, as HTML, names the data and whom to trust.
    assert "<strong>iris: Trust" in _texts(iris, "text/html")
    # The report's figure, inline.
    assert '<img src="data:image/png;base64,' in _texts(figure, "text/html")
    assert _texts(figure, "image/png")
    # The recommended fit predicts the held-out rows in the target's units: within 10% of the
    # RMSE the report gives that contestant (its seeds' mean).
    printed = "".join(
        out.get("text", "") for out in _outputs(diabetes) if out.get("name") == "stdout"
    )
    numbers = json.loads(printed.strip().splitlines()[-1])
    assert numbers["rmse"] == pytest.approx(numbers["report_rmse"], rel=0.10)
    assert numbers["rmse"] > 30  # the target's units (its std is 77), not standardised ones
