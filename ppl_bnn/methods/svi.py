r"""Mean-field variational inference (``svi``) with an ``AutoNormal`` guide.

The guide is :math:`q(\theta) = \prod_i \mathcal N(z_i \mid \mu_i, \sigma_i^2)` on the
unconstrained value :math:`z = T^{-1}(\theta)` of every site; :math:`(\mu, \sigma)` maximise the
reparameterised ELBO

.. math:: \mathcal L = \mathbb E_q[\log p(y, \theta)] - \mathbb E_q[\log q(\theta)]

by Adam (Kingma & Welling 2014; Blundell et al. 2015 for BNNs; Kingma & Ba 2015). Both backends use
their library's own ``AutoNormal``, ``SVI`` and Adam; posterior draws come from the fitted
:math:`(\mu, \sigma)` by one shared sampler, so the two backends draw the same way.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from ppl_bnn.methods.common import (
    RunOutput,
    check_batch_size,
    check_positive_float,
    check_positive_int,
    pyro_scope,
    seeded_torch,
)
from ppl_bnn.model import BNN
from ppl_bnn.registry import register
from ppl_bnn.seeding import child_seed, numpy_generator
from ppl_bnn.spec import BNNSpec
from ppl_bnn.timing import now

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class SVIOptions:
    """Options of ``fit(..., method="svi")``.

    Attributes:
        num_steps: Optimisation steps.
        learning_rate: Adam step size.
        num_particles: Monte Carlo samples per ELBO estimate.
        num_draws: Posterior draws taken from the fitted guide.
        init_scale: Initial std of every guide factor (the libraries' default, 0.1).
        jit: Pyro only: ``JitTrace_ELBO`` (True) or ``Trace_ELBO``. NumPyro always compiles.
        batch_size: Minibatch size per step (``None``: full batch). The likelihood is scaled by
            N / batch_size in the model, so each step's ELBO is unbiased for the full-data ELBO.
        kl_weight: :math:`\\beta` of beta-VI, :math:`\\mathbb E_q[\\log p(y \\mid \\theta)]
            - \\beta\\,\\mathrm{KL}(q \\| p)`; 1 is standard VI, other values are labelled tempered.
            Implemented as a likelihood scale of 1 / beta (same optimum); the recorded losses are
            the beta-ELBO's.
    """

    num_steps: int = 5000
    learning_rate: float = 0.01
    num_particles: int = 1
    num_draws: int = 1000
    init_scale: float = 0.1
    jit: bool = True
    batch_size: int | None = None
    kl_weight: float = 1.0

    def __post_init__(self) -> None:
        check_positive_int("num_steps", self.num_steps)
        check_positive_float("learning_rate", self.learning_rate)
        check_positive_int("num_particles", self.num_particles)
        check_positive_int("num_draws", self.num_draws)
        check_positive_float("init_scale", self.init_scale)
        if not isinstance(self.jit, bool):
            raise ValueError(f"jit must be True or False, got {self.jit!r}")
        if self.batch_size is not None:
            check_positive_int("batch_size", self.batch_size)
        check_positive_float("kl_weight", self.kl_weight)

    def likelihood_scale(self, num_data: int) -> tuple[int, float]:
        """``(batch size, likelihood scale N / (batch size * kl_weight))`` for ``num_data``."""
        batch = num_data if self.batch_size is None else self.batch_size
        check_batch_size(batch, num_data)
        return batch, num_data / batch / self.kl_weight


def mean_field_draws(
    spec: BNNSpec,
    loc: dict[str, np.ndarray],
    scale: dict[str, np.ndarray],
    num_draws: int,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """Draws ``(1, num_draws, *shape)`` from a mean-field Gaussian on unconstrained values.

    Positive sites are mapped back by ``exp``, the bijection both PPLs use for that support.
    """
    draws = {}
    for site in spec.sites():
        z = loc[site.name] + scale[site.name] * rng.standard_normal((num_draws, *site.shape))
        draws[site.name] = (np.exp(z) if site.positive else z).astype(np.float32)[None]
    return draws


def _finish(
    model: BNN,
    options: SVIOptions,
    seed: int,
    losses: np.ndarray,
    loc: dict[str, np.ndarray],
    scale: dict[str, np.ndarray],
    timings: dict[str, float],
    info: dict,
) -> RunOutput:
    losses = options.kl_weight * losses
    info.update(
        {
            "batch_size": options.likelihood_scale(model.num_data)[0],
            "kl_weight": options.kl_weight,
            "tempered": options.kl_weight != 1.0,
        }
    )
    bad = np.flatnonzero(~np.isfinite(losses))
    if bad.size:
        info["diverged_at_step"] = int(bad[0])
        logger.warning("SVI loss became non-finite at step %d", bad[0])
    start = now()
    draws = mean_field_draws(
        model.spec, loc, scale, options.num_draws, numpy_generator(seed, "svi_draws")
    )
    timings["sampling"] = now() - start
    return RunOutput(
        draws=draws,
        timings=timings,
        losses=losses,
        variational={"loc": loc, "scale": scale},
        info=info,
    )


def run_numpyro(model: BNN, options: SVIOptions, seed: int) -> RunOutput:
    import jax
    from jax import lax
    from numpyro.infer import SVI, Trace_ELBO, init_to_uniform
    from numpyro.infer.autoguide import AutoNormal
    from numpyro.optim import Adam

    from ppl_bnn.backends import numpyro_backend as backend

    x, y = backend.data(model.spec, model.x, model.y)
    program = backend.model(model.spec)
    guide = AutoNormal(program, init_loc_fn=init_to_uniform, init_scale=options.init_scale)
    svi = SVI(program, guide, Adam(options.learning_rate), Trace_ELBO(options.num_particles))

    n = model.num_data
    batch, scale = options.likelihood_scale(n)

    def one_step(state, key):
        if batch == n:
            return svi.update(state, x, y, likelihood_scale=scale)
        idx = jax.random.choice(key, n, (batch,), replace=False)
        return svi.update(state, x[idx], y[idx], likelihood_scale=scale)

    def optimise(state, keys):
        return lax.scan(one_step, state, keys)

    key_init, key_batches = jax.random.split(jax.random.PRNGKey(child_seed(seed, "svi")))
    keys = jax.random.split(key_batches, options.num_steps)
    start = now()
    state = svi.init(key_init, x[:batch], y[:batch], likelihood_scale=scale)
    compiled = jax.jit(optimise).lower(state, keys).compile()
    compiled_at = now()
    state, losses = jax.block_until_ready(compiled(state, keys))
    end = now()
    params = svi.get_params(state)
    names = [site.name for site in model.spec.sites()]
    loc = {n: np.asarray(params[f"{n}_auto_loc"]) for n in names}
    scale = {n: np.asarray(params[f"{n}_auto_scale"]) for n in names}
    # Initialisation traces the model and guide; lower().compile() builds the whole scan.
    timings = {"compile": compiled_at - start, "warmup": end - compiled_at}
    info = {"elbo": "Trace_ELBO"}
    return _finish(model, options, seed, np.asarray(losses), loc, scale, timings, info)


def run_pyro(model: BNN, options: SVIOptions, seed: int) -> RunOutput:
    import pyro
    import torch
    from pyro.infer import SVI, JitTrace_ELBO, Trace_ELBO
    from pyro.infer.autoguide import AutoNormal, init_to_uniform

    from ppl_bnn.backends import pyro_backend as backend

    x, y = backend.data(model.spec, model.x, model.y)
    program = backend.model(model.spec)
    elbo_cls = JitTrace_ELBO if options.jit else Trace_ELBO
    elbo_kwargs = {"num_particles": options.num_particles, "max_plate_nesting": 1}
    if options.num_particles > 1:
        elbo_kwargs["vectorize_particles"] = True
    if options.jit:
        elbo_kwargs["ignore_jit_warnings"] = True
    n = model.num_data
    batch, scale = options.likelihood_scale(n)
    generator = torch.Generator().manual_seed(child_seed(seed, "svi_batches"))

    def step() -> float:
        if batch == n:
            return svi.step(x, y, likelihood_scale=scale)
        idx = torch.randperm(n, generator=generator)[:batch]
        return svi.step(x[idx], y[idx], likelihood_scale=scale)

    losses = np.empty(options.num_steps, dtype=np.float64)
    with pyro_scope(), seeded_torch(child_seed(seed, "svi")):
        guide = AutoNormal(program, init_loc_fn=init_to_uniform, init_scale=options.init_scale)
        svi = SVI(
            program, guide, pyro.optim.Adam({"lr": options.learning_rate}), elbo_cls(**elbo_kwargs)
        )
        start = now()
        # The first step traces the model and guide (and JIT-compiles them with JitTrace_ELBO).
        losses[0] = step()
        first = now()
        for i in range(1, options.num_steps):
            losses[i] = step()
        end = now()
        with torch.no_grad():
            names = [site.name for site in model.spec.sites()]
            loc = {n: getattr(guide.locs, n).detach().numpy().copy() for n in names}
            scale = {n: getattr(guide.scales, n).detach().numpy().copy() for n in names}
    timings = {"compile": first - start, "warmup": end - first}
    info = {"elbo": elbo_cls.__name__, "torch_threads": torch.get_num_threads()}
    return _finish(model, options, seed, losses, loc, scale, timings, info)


register("svi", SVIOptions, {"numpyro": run_numpyro, "pyro": run_pyro})
