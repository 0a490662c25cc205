"""Compile and run seconds of NumPyro fits with XLA's default flags and with the tests' flags
(``tests/runtime.py``: no optimisation passes), each fit in a new process on one core, as a test
worker runs them (200 points, 4 inputs, 20 tanh units, the noise learned, seed 0, no JAX cache).

    python benchmarks/compile_flags.py
    python benchmarks/compile_flags.py --methods svi sgld --repeats 3

Prints one Markdown table: per method and flags, the medians over repeats of ``fit``'s compile
seconds (``timings["compile"]``) and of its other seconds, and the ratio of compile seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.runtime import TEST_XLA_FLAGS  # noqa: E402

#: Options of each method: its defaults, but for NUTS's length.
OPTIONS = {"svi": {}, "map": {}, "sgld": {}, "nuts": {"num_warmup": 100, "num_samples": 100}}

_FIT = """
import json, sys
import numpy as np
from ppl_bnn import BNN, configure_runtime, fit
configure_runtime(jax_cache=False)
rng = np.random.default_rng(0)
x = rng.normal(size=(200, 4))
y = x[:, 0] + 0.1 * rng.normal(size=200)
model = BNN(x, y, hidden=(20,), activation="tanh", noise="learned")
result = fit(model, sys.argv[1], backend="numpyro", seed=0, **json.loads(sys.argv[2]))
print(json.dumps(result.timings))
"""


def timed_fit(method: str, flags: str, core: int) -> dict[str, float]:
    """``fit``'s timings in a new process pinned to ``core`` with ``XLA_FLAGS=flags``."""
    env = {**os.environ, "XLA_FLAGS": flags, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", _FIT, method, json.dumps(OPTIONS[method])]
    done = subprocess.run(
        command,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {core}),
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=list(OPTIONS), choices=list(OPTIONS))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--core", type=int, default=0)
    args = parser.parse_args()
    settings = {"XLA's defaults": "", "the tests' flags": " ".join(TEST_XLA_FLAGS)}
    print("| method | flags | compile s | other s | compile / tests' compile |")
    print("|---|---|---|---|---|")
    for method in args.methods:
        seconds = {}
        for name, flags in settings.items():
            runs = [timed_fit(method, flags, args.core) for _ in range(args.repeats)]
            compile_s = statistics.median(r["compile"] for r in runs)
            other_s = statistics.median(r["total"] - r["compile"] for r in runs)
            seconds[name] = (compile_s, other_s)
        tests_compile = seconds["the tests' flags"][0]
        for name, (compile_s, other_s) in seconds.items():
            ratio = compile_s / tests_compile
            print(f"| {method} | {name} | {compile_s:.2f} | {other_s:.2f} | {ratio:.1f} |")


if __name__ == "__main__":
    main()
