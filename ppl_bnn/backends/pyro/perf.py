r"""Pyro's floors for the performance suite (:class:`ppl_bnn.engine.perf.Perf`).

- Gradients: a hand-written torch potential (eager and ``torch.jit.trace``-d) and the Pyro
  model's own flat potential (:class:`~ppl_bnn.backends.pyro.potential.FlatPotential`, eager /
  traced / compiled), each called from a Python loop as a sampler calls it.
- Pyro's HMC/NUTS kernels: cost per leapfrog step on a nearly free potential
  (:math:`\tfrac12 \lVert z \rVert^2`) of the model's dimension. A path through Pyro's NUTS can
  be no cheaper per gradient than its kernel cost plus the cheapest torch gradient of the same
  potential: the floor the performance report compares against.
- The plain LeNet-5 step: ``torch.nn`` modules and ``torch.optim.Adam`` stepped from a Python
  loop, as the Pyro driver runs.

torch is imported when a function is called, never with the module: the suite's parser and the
report read its constants only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ppl_bnn.engine.perf import LENET_CHANNELS, LENET_DENSE, plain_step_batches, start_point
from ppl_bnn.model.bnn import BNN
from ppl_bnn.model.flat import FlatLayout
from ppl_bnn.model.program import forward, noise_std
from ppl_bnn.model.spec import PRECISION_SITE, BNNSpec
from ppl_bnn.timing import now

GRADIENT_VARIANTS: dict[str, str] = {
    "bare_eager": "torch bare gradient (eager)",
    "bare_traced": "torch bare gradient (traced)",
    "pyro_eager": "Pyro potential, eager",
    "pyro_traced": "Pyro potential, traced",
    "pyro_compiled": "Pyro potential, compiled",
}
#: The bare gradients and the compiled potential: the eager and traced potentials only show
#: the compiled one's speed-up, which the floor probe measures.
SCALING_VARIANTS: tuple[str, ...] = ("bare_eager", "bare_traced", "pyro_compiled")
DEFAULT_CALLS = 500
PERSISTENT_CACHE = False
#: Pyro's own paths are timed through ``fit`` (``potential="pyro"``, ``update="pyro"``) against
#: its compiled ones instead.
DIRECT_METHODS: tuple[str, ...] = ()
REFERENCE_PATHS: dict[str, str] = {"nuts": "compiled", "hmc": "compiled", "svi": "fused"}
#: The samplers' potentials (``potential``) and SVI's updates (``jit`` and ``update``).
_SAMPLER_PATHS = {
    "compiled": "compiled flat potential",
    "traced": "traced flat potential",
    "eager": "eager flat potential",
    "pyro_jit": "Pyro's jit_compile",
    "pyro": "Pyro's default path",
}
PATHS: dict[str, dict[str, str]] = {
    "nuts": _SAMPLER_PATHS,
    "hmc": _SAMPLER_PATHS,
    "svi": {
        "fused": "fused (JitTrace_ELBO, one Adam)",
        "jit": "JitTrace_ELBO with SVI.step",
        "eager": "Pyro's default (Trace_ELBO, SVI.step)",
    },
}
GOALS: dict[tuple[str, str], str] = {("svi", "eager"): "speed-up, target >= 2"}

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def bare_torch_energy(spec: BNNSpec) -> Callable[[Any, Any, Any], Any]:
    r"""The potential :math:`U(z)` written directly in torch, with no PPL in between.

    Each site's prior on its unconstrained value with the log-Jacobian of its transform
    (:meth:`~ppl_bnn.model.priors.Prior.log_density_unconstrained`: for a Normal prior
    :math:`-\tfrac12 \sum w^2 / s^2 - n \log(s \sqrt{2\pi})`; for the learned precision
    :math:`\tau = e^u` its Gamma(a, b) log density plus :math:`u`); a Gaussian or categorical
    likelihood. Equal to the Pyro and NumPyro potentials (tested), it only exists to measure the
    floor.
    """
    import torch

    from ppl_bnn.backends.pyro.ops import PPL_PYRO

    layout = FlatLayout.of(spec)
    sites = spec.sites()

    def energy(z, x, y):
        params = layout.unflatten(z)
        theta, log_p = dict(params), 0.0
        for site in sites:
            value = params[site.name]
            prior = site.prior_given(theta)  # latent sites come first, constrained
            log_p = log_p + prior.log_density_unconstrained(value, torch.exp, torch.log)
            theta[site.name] = torch.exp(value) if site.positive else value
        f = forward(spec, theta, x, PPL_PYRO)
        if spec.likelihood == "gaussian":
            sigma = noise_std(spec, theta)
            if PRECISION_SITE in theta:
                log_sigma = -0.5 * params[PRECISION_SITE]
            else:
                log_sigma = math.log(sigma)
            r = (y - f[:, 0]) / sigma
            log_p = log_p - 0.5 * (r * r).sum() - y.shape[0] * (log_sigma + _HALF_LOG_2PI)
        else:
            logp = torch.log_softmax(f, dim=-1)
            log_p = log_p + logp.gather(-1, y[:, None]).sum()
        return -log_p

    return energy


def _time_gradient(fn: Callable, size: int, *, calls: int, repeats: int) -> list[float]:
    """Seconds per ``autograd.grad(fn(z), z)``, a fresh leaf ``z`` each call as samplers make."""
    import torch

    base = torch.as_tensor(start_point(size))
    for _ in range(min(calls, 20)):  # warm up (traced graphs optimise after a few runs)
        z = base.clone().requires_grad_()
        torch.autograd.grad(fn(z), [z])
    out = []
    for _ in range(repeats):
        start = now()
        for _ in range(calls):
            z = base.clone().requires_grad_()
            torch.autograd.grad(fn(z), [z])
        out.append((now() - start) / calls)
    return out


def gradient_costs(
    model: BNN, *, calls: int, repeats: int, variants: tuple[str, ...] = GRADIENT_VARIANTS
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Seconds per gradient of each torch potential in ``variants`` (:data:`GRADIENT_VARIANTS`),
    and the compile seconds of ``pyro_compiled`` where it is among them (a potential that falls
    back to tracing, without a C++ compiler, is not timed)."""
    import torch

    from ppl_bnn.backends.pyro import ops
    from ppl_bnn.backends.pyro.potential import FlatPotential, jit_trace

    spec = model.spec
    x, y = ops.data(spec, model.x, model.y)
    size = FlatLayout.of(spec).size
    bare = bare_torch_energy(spec)
    traced_bare = jit_trace(bare, (torch.zeros(size), x, y))
    fns: dict[str, Callable] = {
        "bare_eager": lambda z: bare(z, x, y),
        "bare_traced": lambda z: traced_bare(z, x, y),
    }
    compiles = {}
    for mode in ("eager", "traced", "compiled"):
        if f"pyro_{mode}" not in variants:
            continue
        start = now()
        potential = FlatPotential(spec, x, y, mode=mode)
        if mode == "compiled":
            compiles["pyro_compiled"] = [now() - start]
        if potential.mode == mode:  # "compiled" falls back to tracing without a C++ compiler
            fns[f"pyro_{mode}"] = potential
    costs = {
        name: _time_gradient(fn, size, calls=calls, repeats=repeats)
        for name, fn in fns.items()
        if name in variants
    }
    return costs, compiles


def kernel_costs(size: int, *, draws: int, repeats: int, seed: int = 0) -> dict[str, list[float]]:
    """Seconds per leapfrog step of Pyro's ``NUTS`` (tree depth <= 6) and ``HMC`` (10 steps) on
    :math:`\\tfrac12 \\lVert z \\rVert^2` in ``size`` dimensions."""
    import torch
    from pyro.infer import HMC, MCMC, NUTS

    from ppl_bnn.backends.pyro.rng import seeded_torch

    out: dict[str, list[float]] = {"nuts": [], "hmc": []}
    for kernel, seconds in out.items():
        for repeat in range(repeats):
            calls = [0]

            def potential(params, calls=calls):
                calls[0] += 1
                z = params["z"]
                return 0.5 * (z * z).sum()

            if kernel == "nuts":
                k = NUTS(potential_fn=potential, max_tree_depth=6)
            else:
                k = HMC(potential_fn=potential, num_steps=10)
            with seeded_torch(seed + repeat):
                mcmc = MCMC(
                    k, num_samples=draws, warmup_steps=draws,
                    initial_params={"z": torch.zeros(size)}, disable_progbar=True,
                )  # fmt: skip
                start = now()
                mcmc.run()
                seconds.append((now() - start) / calls[0])
    return out


def direct_calls(model: BNN, nuts: Any, svi: Any) -> dict[str, Callable[[], None]]:
    """None (:data:`DIRECT_METHODS`)."""
    return {}


def plain_step(
    x: np.ndarray, y: np.ndarray, *, batch_size: int, steps: int, lr: float = 1e-3
) -> tuple[Callable[[], float], float]:
    """``(run, first step's seconds)`` of plain LeNet-5 training in torch (eager ``torch.nn``
    modules, ``torch.optim.Adam``): ``run()`` trains ``steps`` more steps."""
    import torch
    from torch import nn

    from ppl_bnn.backends.pyro.rng import seeded_torch

    (c1, c2, c3), (hidden, classes) = LENET_CHANNELS, LENET_DENSE
    with seeded_torch(0):  # seeded initial weights; the caller's RNG state is restored
        net = nn.Sequential(
            nn.Conv2d(1, c1, 5, padding="same"), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 5, padding="same"), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c2, c3, 5, padding="same"), nn.ReLU(), nn.Flatten(),
            nn.Linear((x.shape[1] // 4) * (x.shape[2] // 4) * c3, hidden), nn.ReLU(),
            nn.Linear(hidden, classes),
        )  # fmt: skip
    adam = torch.optim.Adam(net.parameters(), lr=lr)
    images = torch.as_tensor(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
    labels = torch.as_tensor(np.asarray(y, dtype=np.int64))
    schedule = torch.as_tensor(plain_step_batches(len(x), batch_size, steps + 1))

    def step(i: int) -> None:
        idx = schedule[i]
        loss = nn.functional.cross_entropy(net(images[idx]), labels[idx])
        adam.zero_grad(set_to_none=True)
        loss.backward()
        adam.step()

    start = now()
    step(steps)
    first = now() - start

    def run() -> float:
        start = now()
        for i in range(steps):
            step(i)
        return (now() - start) / steps

    return run, first


def parallelism() -> str:
    """Predictions run on torch's intra-op threads."""
    import torch

    return f"torch threads: {torch.get_num_threads()}"
