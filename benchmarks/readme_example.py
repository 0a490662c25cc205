"""The README example: a 1-hidden-layer BNN fitted by every method on both backends.

Run ``python benchmarks/readme_example.py [METHOD ...]`` (default: every method); it logs one line
per (method, backend) with compile / warmup / sampling seconds, the cost per gradient evaluation for
the samplers, and the test log-likelihood, or the error that stopped that fit.
"""

from __future__ import annotations

import logging
import sys

import numpy as np

from ppl_bnn import BNN, configure_runtime, fit
from ppl_bnn.methods.base import DivergedError, HessianError

METHODS = {
    "svi": {"num_steps": 3000, "num_draws": 500},
    "lowrank": {"num_steps": 3000, "num_draws": 500},
    "fullrank": {"num_steps": 3000, "num_draws": 500},
    "map": {"num_steps": 3000},
    # The Hessian must be taken at a mode: a longer, gentler optimisation than the others.
    "laplace": {"num_steps": 20000, "learning_rate": 0.005, "num_draws": 500},
    "ensemble": {"num_steps": 3000, "num_members": 5},
    "sgld": {"num_burnin": 2000, "num_samples": 500, "thinning": 20, "step_size": 1e-4},
    "sghmc": {"num_burnin": 2000, "num_samples": 500, "thinning": 20, "step_size": 1e-4},
    "nuts": {"num_warmup": 200, "num_samples": 200, "max_tree_depth": 8},
    "hmc": {"num_warmup": 200, "num_samples": 200, "num_steps": 32},
}


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    log = logging.getLogger("readme_example")
    log.setLevel(logging.INFO)
    configure_runtime(host_devices=2, torch_threads=2)  # once, before JAX or torch first run

    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(40, 1))
    y = np.sin(3 * x[:, 0]) + 0.1 * rng.normal(size=40)
    x_test = np.linspace(-1, 1, 50)[:, None]
    y_test = np.sin(3 * x_test[:, 0])

    model = BNN(x, y, hidden=(10,), activation="tanh", prior_scale=1.0, noise=0.1)
    log.info(
        "%-5s %-8s %8s %8s %8s %8s %10s %8s",
        "method",
        "backend",
        "compile",
        "warmup",
        "sampling",
        "total",
        "us/grad",
        "test LL",
    )
    for method in sys.argv[1:] or METHODS:
        options = METHODS[method]
        for backend in ("numpyro", "pyro"):
            try:
                result = fit(model, method, backend=backend, seed=0, **options)
            except (DivergedError, HessianError) as err:
                log.info("%-8s %-8s failed: %s", method, backend, err)
                continue
            pred = result.predict(x_test)
            result.to_arviz()
            t = result.timings
            per_grad = float("nan")
            if "n_steps" in result.sample_stats:
                grads = result.sample_stats["n_steps"].sum()
                per_grad = 1e6 * t["sampling"] / grads
            log.info(
                "%-6s %-8s %8.2f %8.2f %8.2f %8.2f %10.1f %8.3f",
                method,
                backend,
                t["compile"],
                t["warmup"],
                t["sampling"],
                t["total"],
                per_grad,
                pred.mean_log_predictive_density(y_test),
            )


if __name__ == "__main__":
    main()
