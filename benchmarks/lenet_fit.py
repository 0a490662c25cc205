"""One Bayesian LeNet-5 fit per backend, end to end, as a user would run it on MNIST.

``fit(lenet5, "svi", estimator="flipout", batch_size=128, num_steps=300, learning_rate=1e-3,
num_draws=50)`` with the scale-mixture prior on ``--train`` MNIST training images, then the
predictive on ``--test`` test images; per backend, the wall time of ``fit`` and of the
prediction, the fit's own timings (compilation, the MAP warm start, the Flipout steps, the
training log-likelihood) and the test accuracy. Run it on an idle machine::

    python benchmarks/lenet_fit.py --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from ppl_bnn import BNN, configure_runtime, fit
from ppl_bnn.bench import lenet
from ppl_bnn.data import load_dataset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--train", type=int, default=10_000)
    parser.add_argument("--test", type=int, default=2_500)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--backends", default="pyro,numpyro")
    args = parser.parse_args(argv)
    configure_runtime(host_devices=1)
    data = load_dataset("mnist", data_dir=args.data_dir, image=True, max_train=args.train,
                        max_test=args.test, seed=0)  # fmt: skip
    model = BNN(data.x_train, data.y_train, layers=lenet.lenet5(), likelihood="categorical",
                num_classes=10, prior=lenet.PRIORS["scale_mixture"])  # fmt: skip
    print(f"{args.train} training and {args.test} test images, {args.steps} Flipout steps")
    print("backend | fit (s) | compile | MAP start | steps | per step | train LL | predict (s) "
          "| accuracy")  # fmt: skip
    for backend in args.backends.split(","):
        start = time.perf_counter()
        result = fit(model, "svi", backend=backend, seed=0, estimator="flipout", batch_size=128,
                     num_steps=args.steps, learning_rate=1e-3, num_draws=50)  # fmt: skip
        fitted = time.perf_counter()
        probs = result.predict(data.x_test).probs
        predicted = time.perf_counter()
        t = result.timings
        steps_s = lenet.own_steps_seconds(result)
        start_s = t["warmup"] - steps_s
        accuracy = float(np.mean(probs.argmax(axis=1) == data.y_test))
        print(f"{backend} | {fitted - start:.1f} | {t['compile']:.1f} | {start_s:.1f} | "
              f"{steps_s:.1f} | {steps_s / args.steps * 1e3:.0f} ms | {t['log_likelihood']:.1f} | "
              f"{predicted - fitted:.1f} | {accuracy:.4f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
