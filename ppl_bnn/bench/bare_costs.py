r"""What a gradient of the log joint, and a step of Pyro's HMC/NUTS kernels, cost with nothing
else around them: each backend's floor.

- JAX: the gradient of the NumPyro model's potential, jitted, called ``calls`` times inside one
  compiled loop (so no Python or dispatch cost is counted).
- torch: the cheapest of a hand-written torch potential (eager and ``torch.jit.trace``-d) and the
  Pyro model's own flat potential (:class:`~ppl_bnn.backends.pyro.potential.FlatPotential`,
  eager / traced / compiled), each called from a Python loop as a sampler calls it.
- Pyro's HMC/NUTS kernels: cost per leapfrog step on a nearly free potential
  (:math:`\tfrac12 \lVert z \rVert^2`) of the model's dimension.

A path through Pyro's NUTS can be no cheaper per gradient than its kernel cost plus the cheapest
torch gradient of the same potential: the floor the performance report compares against.

Every function returns seconds per call, one number per repeat.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ppl_bnn.model.bnn import BNN
from ppl_bnn.model.flat import FlatLayout
from ppl_bnn.model.program import constrain, forward, noise_std, site_transforms
from ppl_bnn.model.spec import PRECISION_SITE, BNNSpec
from ppl_bnn.timing import now


def _start(size: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-0.5, 0.5, size).astype(np.float32)


def jax_gradient(model: BNN, *, calls: int, repeats: int) -> list[float]:
    """Seconds per gradient of the NumPyro potential inside a compiled ``fori_loop``."""
    import jax
    import jax.numpy as jnp

    from ppl_bnn.backends.numpyro import ops as backend

    spec = model.spec
    layout = FlatLayout.of(spec)
    x, y = backend.data(spec, model.x, model.y)
    transforms = site_transforms(spec, backend.PPL_NUMPYRO)
    log_joint = backend.log_joint(spec)

    def potential(z):
        theta, log_det = constrain(transforms, layout.unflatten(z))
        return -(log_joint(theta, x, y) + log_det)

    grad = jax.grad(potential)

    @jax.jit
    def loop(z):
        # Each step depends on the last, so no gradient can be hoisted or skipped.
        return jax.lax.fori_loop(0, calls, lambda _, v: v - 1e-9 * grad(v), z)

    z = jnp.asarray(_start(layout.size))
    jax.block_until_ready(loop(z))  # compile
    out = []
    for _ in range(repeats):
        start = now()
        jax.block_until_ready(loop(z))
        out.append((now() - start) / calls)
    return out


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


_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _time_torch_gradient(fn: Callable, size: int, *, calls: int, repeats: int) -> list[float]:
    """Seconds per ``autograd.grad(fn(z), z)``, a fresh leaf ``z`` each call as samplers make."""
    import torch

    base = torch.as_tensor(_start(size))
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


TORCH_VARIANTS = ("bare_eager", "bare_traced", "pyro_eager", "pyro_traced", "pyro_compiled")


def torch_gradients(
    model: BNN, *, calls: int, repeats: int, variants: tuple[str, ...] = TORCH_VARIANTS
) -> dict[str, list[float]]:
    """Seconds per gradient of each torch potential in ``variants``: ``bare_eager``,
    ``bare_traced`` and the Pyro model's flat potential ``pyro_eager``, ``pyro_traced``,
    ``pyro_compiled``, plus the compile seconds of the last (``pyro_compile_s``, NaN when not
    measured)."""
    import torch

    from ppl_bnn.backends.pyro import ops as backend
    from ppl_bnn.backends.pyro.potential import FlatPotential, jit_trace

    spec = model.spec
    x, y = backend.data(spec, model.x, model.y)
    size = FlatLayout.of(spec).size
    bare = bare_torch_energy(spec)
    traced_bare = jit_trace(bare, (torch.zeros(size), x, y))
    fns: dict[str, Callable] = {
        "bare_eager": lambda z: bare(z, x, y),
        "bare_traced": lambda z: traced_bare(z, x, y),
    }
    compile_s = math.nan
    for mode in ("eager", "traced", "compiled"):
        if f"pyro_{mode}" not in variants:
            continue
        start = now()
        potential = FlatPotential(spec, x, y, mode=mode)
        if mode == "compiled":
            compile_s = now() - start
        if potential.mode == mode:  # "compiled" falls back to tracing without a C++ compiler
            fns[f"pyro_{mode}"] = potential
    out = {
        name: _time_torch_gradient(fn, size, calls=calls, repeats=repeats)
        for name, fn in fns.items()
        if name in variants
    }
    out["pyro_compile_s"] = [compile_s]
    return out


def pyro_kernel(
    size: int, *, kernel: str = "nuts", draws: int, repeats: int, seed: int = 0
) -> list[float]:
    """Seconds per leapfrog step of Pyro's ``NUTS`` (or ``HMC``, 10 steps) on
    :math:`\\tfrac12 \\lVert z \\rVert^2` in ``size`` dimensions (tree depth <= 6)."""
    import torch
    from pyro.infer import HMC, MCMC, NUTS

    from ppl_bnn.backends.pyro.rng import seeded_torch

    out = []
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
                k,
                num_samples=draws,
                warmup_steps=draws,
                initial_params={"z": torch.zeros(size)},
                disable_progbar=True,
            )
            start = now()
            mcmc.run()
            out.append((now() - start) / calls[0])
    return out
