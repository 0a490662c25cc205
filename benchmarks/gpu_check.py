"""A prepared check of the GPU path: MNIST networks and a digits reference on one device.

Prints one table:

- **LeNet-5, Flipout**: a Bayesian LeNet-5 (``ppl_bnn.bench.lenet``, the scale-mixture prior)
  fitted by mean-field VI with the Flipout estimator on MNIST's training images, minibatches of
  128, for 3 epochs, per backend: test accuracy and NLL (10 draws), seconds per epoch, and the
  Bayesian step against a plain LeNet-5 training step in the same framework;
- **MLP-1024**: one hidden layer of 1,024 ReLU units, mean-field VI with KL weight 1e-3,
  minibatches of 128, up to 20 epochs, per backend: test accuracy;
- **digits reference**: the chain-ensemble reference of the default suite's digits network
  (MCLMC chains from deep-ensemble starts, in batches of 16, at most 64 chains or 3 minutes),
  within a time limit: the chains kept of those started (and why any was dropped), the floor
  (total variation between two halves of the chains) and minutes.

On a GPU machine, from the repository, with the packages the machine lacks brought as wheels::

    pip install --no-deps pyro_ppl-*.whl arviz-*.whl   # and what else the import check names
    PYTHONPATH=. python benchmarks/gpu_check.py --data-dir DATA

``--quick`` runs the same checks on a few hundred images and steps, on the CPU, end to end in
minutes: it checks the script, not the GPU. ``--device`` overrides the device (default: cuda,
or cpu with ``--quick``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: What the check imports, and the lowest version of each that the package was built against
#: (older ones are named, not refused: the run says which it used).
NEEDS = {
    "torch": "2.4",
    "jax": "0.4.30",
    "numpyro": "0.15",
    "pyro": "1.9.1",
    "arviz": "0.17",
}
BATCH = 128
LOGGER = logging.getLogger("gpu_check")


@dataclass(frozen=True)
class Sizes:
    """How much of each check runs."""

    train: int | None  # MNIST training images (None: all 60,000)
    test: int | None  # test images scored
    lenet_epochs: float
    mlp_epochs: float
    plain_steps: int
    reference: dict[str, Any]  # the [reference] table of the digits suite


FULL = Sizes(
    train=None,
    test=None,
    lenet_epochs=3,
    mlp_epochs=20,
    plain_steps=50,
    reference={"engine": "mclmc", "num_chains": 64, "chains_per_batch": 16,
               "max_seconds": 180, "timeout_s": 240},
)  # fmt: skip
QUICK = Sizes(
    train=512,
    test=256,
    lenet_epochs=1,
    mlp_epochs=1,
    plain_steps=3,
    reference={"engine": "mclmc", "num_chains": 8, "chains_per_batch": 8, "num_warmup": 400,
               "num_samples": 20, "thinning": 2, "timeout_s": 240},
)  # fmt: skip


def versions() -> dict[str, str]:
    """The installed version of each needed package; exits naming any that is missing."""
    found, missing = {}, []
    for name in NEEDS:
        try:
            found[name] = importlib.import_module(name).__version__
        except ImportError:
            missing.append(name)
    if missing:
        sys.exit(
            "gpu_check needs "
            + ", ".join(f"{n}>={NEEDS[n]}" for n in missing)
            + " (bring them as wheels: pip install --no-deps <wheel>)"
        )
    try:  # the rest of what ppl_bnn imports (xarray, h5netcdf, scikit-learn, ...)
        importlib.import_module("ppl_bnn.bench")
        importlib.import_module("ppl_bnn.report")
    except ModuleNotFoundError as err:
        sys.exit(f"gpu_check needs {err.name} (bring it as a wheel: pip install --no-deps <wheel>)")
    return found


def mnist(data_dir: str | None, sizes: Sizes) -> Any:
    from ppl_bnn.data import load_dataset

    return load_dataset(
        "mnist", data_dir=data_dir, image=True, max_train=sizes.train, max_test=sizes.test, seed=0
    )


def steps_for(epochs: float, n: int) -> int:
    return max(1, round(epochs * n / BATCH))


def scores(result: Any, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Test accuracy and NLL of a classification fit's predictive."""
    from ppl_bnn.metrics.classification import classification_metrics

    out = classification_metrics(result.predict(x).draws, y)
    return out["accuracy"], out["nll"]


def lenet_rows(data: Any, backend: str, sizes: Sizes) -> list[tuple[str, ...]]:
    from ppl_bnn import BNN, fit
    from ppl_bnn.bench import lenet
    from ppl_bnn.bench.perf_suite import perf_module

    x = data.x_train.astype(np.float32)
    n = len(x)
    plain_run, _ = perf_module(backend).plain_step(x, data.y_train, batch_size=BATCH,
                                                   steps=sizes.plain_steps)  # fmt: skip
    plain_s = plain_run()
    model = BNN(x, data.y_train, layers=lenet.lenet5(), likelihood="categorical",
                num_classes=10, prior=lenet.PRIORS["scale_mixture"])  # fmt: skip
    steps = steps_for(sizes.lenet_epochs, n)
    result = fit(model, "svi", backend=backend, seed=0, estimator="flipout", batch_size=BATCH,
                 num_steps=steps, learning_rate=1e-3, num_draws=10)  # fmt: skip
    step_s = lenet.own_steps_seconds(result) / steps
    accuracy, nll = scores(result, data.x_test, data.y_test)
    epoch_s = step_s * n / BATCH
    return [
        (
            "LeNet-5, Flipout",
            backend,
            f"{sizes.lenet_epochs:g} epochs of {n}",
            f"accuracy {accuracy:.4f}, NLL {nll:.3f}",
            f"{epoch_s:.1f} s/epoch; step {step_s * 1e3:.1f} ms = {step_s / plain_s:.2f}x plain "
            f"({plain_s * 1e3:.1f} ms); compile {result.timings['compile']:.1f} s",
        )
    ]


def mlp_rows(data: Any, backend: str, sizes: Sizes) -> list[tuple[str, ...]]:
    from ppl_bnn import BNN, fit

    x = data.x_train.reshape(len(data.x_train), -1).astype(np.float32)
    x_test = data.x_test.reshape(len(data.x_test), -1).astype(np.float32)
    model = BNN(x, data.y_train, hidden=(1024,), activation="relu", likelihood="categorical",
                num_classes=10)  # fmt: skip
    steps = steps_for(sizes.mlp_epochs, len(x))
    result = fit(model, "svi", backend=backend, seed=0, batch_size=BATCH, num_steps=steps,
                 learning_rate=1e-3, kl_weight=1e-3, num_draws=20)  # fmt: skip
    accuracy, nll = scores(result, x_test, data.y_test)
    return [
        (
            "MLP-1024, VI",
            backend,
            f"{sizes.mlp_epochs:g} epochs of {len(x)}",
            f"accuracy {accuracy:.4f}, NLL {nll:.3f}",
            f"{result.timings['warmup']:.1f} s of steps",
        )
    ]


def reference_suite(sizes: Sizes) -> str:
    """The suite file of the digits reference: the default suite's network, ``sizes``'s
    ``[reference]`` table."""
    # JSON's numbers, booleans and plain strings are TOML's too.
    table = "\n".join(f"{k} = {json.dumps(v)}" for k, v in sizes.reference.items())
    return (
        'name = "gpu-check"\nbackends = ["numpyro"]\n'
        f"[reference]\n{table}\n"
        '[model]\nhidden = [50]\nactivation = "tanh"\n'
        '[[datasets]]\nname = "digits"\n[methods.map]\n'
    )


def reference_rows(sizes: Sizes, device: str) -> list[tuple[str, ...]]:
    """The digits reference through ``ppl-bnn reference``, in a cache of its own."""
    from ppl_bnn.cli import main

    folder = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    suite = folder / "gpu-check.toml"
    suite.write_text(reference_suite(sizes))
    start = time.perf_counter()
    status = main(["reference", "--suite", str(suite), "--reference-dir", str(folder / "cache"),
                   "--jobs", "1", "--device", device])  # fmt: skip
    minutes = (time.perf_counter() - start) / 60
    found = sorted((folder / "cache").rglob("reference.json"))
    if not found:
        return [("digits reference", "numpyro", "", f"no result (exit {status})", "")]
    doc = json.loads(found[0].read_text())
    if doc["status"] != "ok":  # it broke down or failed: say how
        return [("digits reference", "numpyro", "", f"no result ({doc['status']})", doc["note"])]
    fit_info = json.loads((found[0].parent / "fit.json").read_text())["info"]
    settings = sizes.reference
    return [
        (
            "digits reference",
            "numpyro",
            f"{settings['engine']}, at most {settings['num_chains']} chains",
            reference_result(doc, fit_info),
            f"{minutes:.1f} min (limit {settings['timeout_s'] / 60:.0f})",
        )
    ]


def reference_result(doc: dict[str, Any], fit_info: dict[str, Any]) -> str:
    """The verdict, the chains kept of those started and the floor; a chain the engine dropped
    before the gate (MCLMC: one whose tuning froze it, ``dropped_chains`` in each batch's
    ``info``) counts as started, with its reason."""
    diag = doc["diagnostics"]
    verdict = "passed" if doc["passed"] else "no floor"
    batches = fit_info.get("batches") or [fit_info]
    dropped = [d["reason"] for batch in batches for d in batch.get("dropped_chains") or []]
    run = diag["chains_run"]
    started = None if run is None else run + len(dropped)
    why = ""
    if dropped:
        reasons = "; ".join(sorted(set(dropped)))
        why = f" ({len(dropped)} dropped before the gate: {reasons})"
    return (
        f"{verdict}: {_show(diag['chains_kept'], '.0f')} of {_show(started, '.0f')} chains "
        f"kept{why}, floor TV {_show(diag['floor_tv'], '.4f')}"
    )


def _show(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def print_table(rows: list[tuple[str, ...]]) -> None:
    header = ("check", "backend", "budget", "result", "cost")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for line in [header, tuple("-" * w for w in widths), *rows]:
        print(" | ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, on the CPU")
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), default=None)
    parser.add_argument("--data-dir", default=None, help="holds mnist/ and fashion-mnist/")
    parser.add_argument("--backends", default="numpyro,pyro")
    parser.add_argument("--skip", default="", help="comma-separated: lenet, mlp, reference")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    found = versions()
    from ppl_bnn import configure_runtime, devices

    device = args.device or ("cpu" if args.quick else "cuda")
    configure_runtime(host_devices=1, device=device)
    sizes = QUICK if args.quick else FULL
    skip = {s for s in args.skip.split(",") if s}
    backends = [b for b in args.backends.split(",") if b]
    start = time.perf_counter()
    rows: list[tuple[str, ...]] = []
    data = None if {"lenet", "mlp"} <= skip else mnist(args.data_dir, sizes)
    for backend in backends:
        if "lenet" not in skip:
            rows += lenet_rows(data, backend, sizes)
        if "mlp" not in skip:
            rows += mlp_rows(data, backend, sizes)
    if "reference" not in skip:
        rows += reference_rows(sizes, devices.current())
    print(f"device {devices.current()}; " + ", ".join(f"{k} {v}" for k, v in found.items()))
    print_table(rows)
    print(f"{(time.perf_counter() - start) / 60:.1f} minutes in all")
    failed = [f"{row[0]} ({row[1]})" for row in rows if row[3].startswith("no result")]
    if failed:
        print(f"no result: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
