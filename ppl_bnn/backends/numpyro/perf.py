"""NumPyro's floors for the performance suite (:class:`ppl_bnn.engine.perf.Perf`): the gradient
of the model's potential inside one compiled loop, the plain LeNet-5 step in JAX, and NumPyro's
own NUTS and SVI called directly.

JAX is imported when a function is called, never with the module: the suite's parser and the
report read its constants only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ppl_bnn.engine.perf import LENET_CHANNELS, LENET_DENSE, plain_step_batches, start_point
from ppl_bnn.model.bnn import BNN
from ppl_bnn.model.flat import FlatLayout
from ppl_bnn.model.program import constrain, site_transforms
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import now

GRADIENT_VARIANTS: dict[str, str] = {"bare_jit": "JAX bare gradient"}
SCALING_VARIANTS: tuple[str, ...] = ("bare_jit",)
DEFAULT_CALLS = 5000
PERSISTENT_CACHE = True
DIRECT_METHODS: tuple[str, ...] = ("nuts", "svi")
#: Every method runs one path through ``fit``.
REFERENCE_PATHS: dict[str, str] = {}
PATHS: dict[str, dict[str, str]] = {}
GOALS: dict[tuple[str, str], str] = {}


def gradient_costs(
    model: BNN, *, calls: int, repeats: int, variants: tuple[str, ...] = GRADIENT_VARIANTS
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Seconds per gradient of the NumPyro potential, ``calls`` of them inside one jitted
    ``fori_loop`` (so that no Python or dispatch cost is counted); the loop's compilation is not
    reported."""
    import jax
    import jax.numpy as jnp

    from ppl_bnn.backends.numpyro import ops

    if "bare_jit" not in variants:
        return {}, {}
    spec = model.spec
    layout = FlatLayout.of(spec)
    x, y = ops.data(spec, model.x, model.y)
    transforms = site_transforms(spec, ops.PPL_NUMPYRO)
    log_joint = ops.log_joint(spec)

    def potential(z):
        theta, log_det = constrain(transforms, layout.unflatten(z))
        return -(log_joint(theta, x, y) + log_det)

    grad = jax.grad(potential)

    @jax.jit
    def loop(z):
        # Each step depends on the last, so no gradient can be hoisted or skipped.
        return jax.lax.fori_loop(0, calls, lambda _, v: v - 1e-9 * grad(v), z)

    z = jnp.asarray(start_point(layout.size))
    jax.block_until_ready(loop(z))  # compile
    out = []
    for _ in range(repeats):
        start = now()
        jax.block_until_ready(loop(z))
        out.append((now() - start) / calls)
    return {"bare_jit": out}, {}


def kernel_costs(size: int, *, draws: int, repeats: int) -> dict[str, list[float]]:
    """None: NumPyro's kernels are compiled with the potential, so its NUTS per gradient against
    the bare gradient is the whole of the sampler's cost."""
    return {}


def direct_calls(model: BNN, nuts: Any, svi: Any) -> dict[str, Callable[[], None]]:
    """NumPyro's ``MCMC(NUTS)`` and ``SVI`` with ``AutoNormal``, called directly with ``fit``'s
    keys and settings (``nuts``, ``svi``: the options dataclasses); the direct SVI draws
    ``num_draws`` from the guide too, as ``fit`` does."""
    import jax
    from numpyro.infer import MCMC, NUTS, SVI, Trace_ELBO, init_to_uniform
    from numpyro.infer.autoguide import AutoNormal
    from numpyro.optim import Adam

    from ppl_bnn.backends.numpyro import ops

    program = ops.model(model.spec)
    x, y = ops.data(model.spec, model.x, model.y)

    def direct_nuts() -> None:
        kernel = NUTS(
            program,
            max_tree_depth=nuts.max_tree_depth,
            target_accept_prob=nuts.target_accept,
            step_size=nuts.step_size,
            init_strategy=init_to_uniform,
        )
        mcmc = MCMC(
            kernel, num_warmup=nuts.num_warmup, num_samples=nuts.num_samples, progress_bar=False
        )
        mcmc.warmup(jax.random.PRNGKey(child_seed(0, "mcmc_warmup")), x, y)
        mcmc.run(jax.random.PRNGKey(child_seed(0, "mcmc_sample")), x, y)
        jax.block_until_ready(mcmc.get_samples())

    def direct_svi() -> None:
        guide = AutoNormal(program, init_scale=svi.init_scale)
        engine = SVI(program, guide, Adam(svi.learning_rate), Trace_ELBO())
        key_fit, key_draw = jax.random.split(jax.random.PRNGKey(child_seed(0, "svi")))
        out = engine.run(key_fit, svi.num_steps, x, y, progress_bar=False)
        draws = guide.sample_posterior(key_draw, out.params, sample_shape=(svi.num_draws,))
        jax.block_until_ready(draws)

    return {"nuts": direct_nuts, "svi": direct_svi}


def plain_step(
    x: np.ndarray, y: np.ndarray, *, batch_size: int, steps: int, lr: float = 1e-3
) -> tuple[Callable[[], float], float]:
    """``(run, compile seconds)`` of plain LeNet-5 training in JAX: one jitted step with a
    hand-written Adam (Kingma & Ba 2015), called once per step as the NumPyro drivers step a
    network with convolutions on the CPU (:func:`ppl_bnn.backends.numpyro.steps.steps_in_loop`:
    XLA:CPU runs convolutions far slower inside a compiled loop); ``run()`` trains ``steps``
    steps from the same start."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def conv(h, w, b):
        dims = ("NHWC", "HWIO", "NHWC")
        out = lax.conv_general_dilated(h, w, (1, 1), "SAME", dimension_numbers=dims)
        return jax.nn.relu(out + b)

    def pool(h):
        return lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def logits(p, h):
        h = pool(conv(h, p["c1"], p["b1"]))
        h = pool(conv(h, p["c2"], p["b2"]))
        h = conv(h, p["c3"], p["b3"]).reshape(h.shape[0], -1)
        h = jax.nn.relu(h @ p["d1"] + p["e1"])
        return h @ p["d2"] + p["e2"]

    def loss(p, xb, yb):
        log_p = jax.nn.log_softmax(logits(p, xb))
        return -jnp.take_along_axis(log_p, yb[:, None], axis=1).mean()

    rng = np.random.default_rng(0)
    (c1, c2, c3), (hidden, classes) = LENET_CHANNELS, LENET_DENSE
    flat = (x.shape[1] // 4) * (x.shape[2] // 4) * c3
    shapes = {
        "c1": (5, 5, 1, c1), "b1": (c1,), "c2": (5, 5, c1, c2), "b2": (c2,),
        "c3": (5, 5, c2, c3), "b3": (c3,), "d1": (flat, hidden), "e1": (hidden,),
        "d2": (hidden, classes), "e2": (classes,),
    }  # fmt: skip
    params = {k: jnp.asarray(0.05 * rng.standard_normal(s), jnp.float32) for k, s in shapes.items()}
    xs, ys = jnp.asarray(x), jnp.asarray(y, jnp.int32)
    b1, b2, eps = 0.9, 0.999, 1e-8

    def step(carry, inputs):
        p, m, v = carry
        i, idx = inputs
        g = jax.grad(loss)(p, xs[idx], ys[idx])
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        t = i + 1.0
        p = jax.tree.map(
            lambda p, m, v: p - lr * (m / (1 - b1**t)) / (jnp.sqrt(v / (1 - b2**t)) + eps), p, m, v
        )
        return (p, m, v), None

    zeros = jax.tree.map(jnp.zeros_like, params)
    schedule = jnp.asarray(plain_step_batches(len(x), batch_size, steps))
    carry = (params, zeros, zeros)
    start = now()
    compiled = jax.jit(step).lower(carry, (jnp.float32(0), schedule[0])).compile()
    compile_s = now() - start

    def run() -> float:
        state = carry
        start = now()
        for i in range(steps):
            state, _ = compiled(state, (jnp.float32(i), schedule[i]))
        jax.block_until_ready(state)
        return (now() - start) / steps

    return run, compile_s


def parallelism() -> str:
    """Predictions split the draws over JAX's host devices."""
    import jax

    return f"host devices: {jax.local_device_count()}"
