"""MAP against MC dropout on one UCI split at several training schedules, both at equal budgets.

Run ``python benchmarks/uci_schedules.py [--dataset NAME] [--split K] [--rate P] [--data-dir
DIR]`` (default: protein-tertiary-structure, split 0, rate 0.005, ``$PPL_BNN_DATA``); it logs
one line per (schedule, method) with the test log-likelihood and RMSE in original units (as the
``uci`` suite scores them), the training log-likelihood and the fit's seconds. The model is the
``uci`` suite's: one hidden layer of ReLU units (100 for protein, 50 otherwise), a Normal(0, 1)
prior, the noise learned. The schedules are the suite's own (4,000 full-batch Adam steps at
0.01), the same at 0.003, twice as many steps, and Gal & Ghahramani's UCI training (Adam at
0.001 on minibatches of 128; ``n_epochs.txt`` x 10 epochs, 200 for protein).

It asks whether MC dropout trails MAP on a large set because of its training budget: if it
trails at every schedule, the gap is the method's, not the schedule's.
"""

from __future__ import annotations

import argparse
import logging
import math
from typing import Any

from ppl_bnn import BNN, configure_runtime, fit
from ppl_bnn.bench.evaluate import evaluate
from ppl_bnn.data import load_dataset

#: Gal & Ghahramani's UCI training: epochs per set before their 10x multiplier, batch size.
GAL_EPOCHS = {"protein-tertiary-structure": 20}
GAL_DEFAULT_EPOCHS, GAL_BATCH, GAL_EPOCH_MULTIPLIER = 40, 128, 10


def schedules(num_train: int, dataset: str) -> dict[str, dict[str, Any]]:
    """The training schedules compared: name -> optimisation options."""
    epochs = GAL_EPOCHS.get(dataset, GAL_DEFAULT_EPOCHS) * GAL_EPOCH_MULTIPLIER
    gal_steps = epochs * math.ceil(num_train / GAL_BATCH)
    return {
        "suite: 4,000 full-batch steps, lr 0.01": {"num_steps": 4000, "learning_rate": 0.01},
        "4,000 full-batch steps, lr 0.003": {"num_steps": 4000, "learning_rate": 0.003},
        "8,000 full-batch steps, lr 0.01": {"num_steps": 8000, "learning_rate": 0.01},
        f"Gal: {epochs} epochs of batches of {GAL_BATCH}, lr 0.001": {
            "num_steps": gal_steps,
            "batch_size": GAL_BATCH,
            "learning_rate": 0.001,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="protein-tertiary-structure")
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--rate", type=float, default=0.005, help="MC dropout's rate")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    log = logging.getLogger("uci_schedules")
    log.setLevel(logging.INFO)
    configure_runtime(host_devices=1)  # once, before JAX first runs

    data = load_dataset(args.dataset, split=args.split, data_dir=args.data_dir)
    hidden = 100 if args.dataset == "protein-tertiary-structure" else 50
    model = BNN(data.x_train, data.y_train, hidden=(hidden,), activation="relu", noise="learned")
    methods = {"map": {}, "mcdropout": {"dropout_rate": args.rate, "num_draws": 500}}
    log.info("%s, split %d, %d training points", args.dataset, args.split, data.n_train)
    log.info("%-48s %-9s %8s %8s %8s %7s", "schedule", "method", "test LL", "RMSE", "train LL", "s")
    for name, schedule in schedules(data.n_train, args.dataset).items():
        for method, options in methods.items():
            result = fit(model, method, backend="numpyro", seed=0, **schedule, **options)
            metrics = evaluate(result, data).metrics
            log.info(
                "%-48s %-9s %8.4f %8.4f %8.4f %7.1f",
                name,
                method,
                metrics["test_ll"],
                metrics["rmse"],
                metrics["train_ll"],
                result.timings["total"],
            )


if __name__ == "__main__":
    main()
