"""The Bayes-by-backprop MNIST MLP: one hidden layer of 1,024 ReLU units, mean-field VI with
KL weight 1e-3, minibatches of 128, on all 60,000 training images; test accuracy and NLL on all
10,000 test images, and the held-out log-likelihood curve (500 test images) along the way.

The published figure is 0.979 (the Bayes-by-backprop MLP-1024 example). Settings are flags, so
that each row of a search is one command::

    python benchmarks/mlp1024.py --data-dir ../shared/data --epochs 20 --lr 1e-3
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from ppl_bnn import BNN, configure_runtime, fit
from ppl_bnn.data import load_dataset
from ppl_bnn.metrics.classification import classification_metrics

BATCH = 128


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--backend", default="numpyro")
    parser.add_argument("--epochs", type=float, default=20)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--kl-weight", type=float, default=1e-3)
    parser.add_argument("--init-scale", type=float, default=0.1)
    parser.add_argument("--init-map-steps", type=int, default=200)
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    configure_runtime(host_devices=1)
    data = load_dataset("mnist", data_dir=args.data_dir)
    model = BNN(data.x_train, data.y_train, hidden=(1024,), activation="relu",
                likelihood="categorical", num_classes=10)  # fmt: skip
    steps = round(args.epochs * len(data.x_train) / BATCH)
    rng = np.random.default_rng(0)
    held = rng.choice(len(data.x_test), size=500, replace=False)
    start = time.perf_counter()
    result = fit(model, "svi", backend=args.backend, seed=args.seed, batch_size=BATCH,
                 num_steps=steps, learning_rate=args.lr, kl_weight=args.kl_weight,
                 init_scale=args.init_scale, init_map_steps=args.init_map_steps,
                 num_draws=args.draws, validation=(data.x_test[held], data.y_test[held]),
                 curve_every=max(1, steps // 10))  # fmt: skip
    seconds = time.perf_counter() - start
    scores = classification_metrics(result.predict(data.x_test).draws, data.y_test)
    curve = result.info["training_curve"]
    print(f"{args.backend}: {args.epochs:g} epochs ({steps} steps), lr {args.lr:g}, "
          f"KL weight {args.kl_weight:g}, init std {args.init_scale:g}, "
          f"{args.init_map_steps} MAP steps, seed {args.seed}: fit {seconds:.0f} s")  # fmt: skip
    checkpoints = dict(zip(curve["step"], curve["held_out_ll"], strict=True))
    print("held-out LL by epoch: " + ", ".join(
        f"{s * BATCH / len(data.x_train):.1f}: {ll:.3f}" for s, ll in checkpoints.items()
    ))  # fmt: skip
    print(f"test accuracy {scores['accuracy']:.4f}, NLL {scores['nll']:.4f} "
          f"({len(data.x_test)} images, {args.draws} draws)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
