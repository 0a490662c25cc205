"""A model's numbers (the known noise std, the Normal priors' stds) as arguments of the one BNN
program: given them, the program of the spec without its numbers has the spec's own log density
on both backends, and the numbers that are not lifted stay in the spec."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from ppl_bnn import BNN
from ppl_bnn.model.dropout import Dropout
from ppl_bnn.model.program import NOISE_NUMBER, bnn_model, model_numbers, numberless
from ppl_bnn.model.spec import BNNSpec
from ppl_bnn.priors import Horseshoe, Normal, ScaleMixture


def _model(**kwargs: object) -> BNN:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(30, 2))
    y = np.sin(x[:, 0]) + 0.2 * rng.normal(size=30)
    return BNN(x, y, hidden=(5,), **kwargs)


def _params(spec: BNNSpec, seed: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        site.name: (np.exp if site.positive else np.asarray)(rng.normal(size=site.shape))
        for site in spec.sites()
    }


def _log_joint(backend: str, spec: BNNSpec, model: BNN, params: dict, **kwargs: object) -> float:
    """The program's log joint at ``params`` on ``backend``, ``kwargs`` passed to it."""
    if backend == "numpyro":
        import jax.numpy as jnp
        import numpyro
        from numpyro.infer.util import log_density

        from ppl_bnn.backends.numpyro.ops import PPL_NUMPYRO

        program = numpyro.handlers.seed(partial(bnn_model, spec, PPL_NUMPYRO), rng_seed=0)
        values = {k: jnp.asarray(v, dtype=jnp.float32) for k, v in params.items()}
        args = (jnp.asarray(model.x, jnp.float32), jnp.asarray(model.y, jnp.float32))
        numbers = kwargs.pop("numbers", None)
        if numbers is not None:
            kwargs["numbers"] = {k: jnp.asarray(v, jnp.float32) for k, v in numbers.items()}
        return float(log_density(program, args, kwargs, values)[0])
    import pyro
    import torch
    from pyro import poutine

    from ppl_bnn.backends.pyro.ops import PPL_PYRO

    program = partial(bnn_model, spec, PPL_PYRO)
    values = {k: torch.tensor(v, dtype=torch.float32) for k, v in params.items()}
    x = torch.tensor(model.x, dtype=torch.float32)
    y = torch.tensor(model.y, dtype=torch.float32)
    numbers = kwargs.pop("numbers", None)
    if numbers is not None:
        kwargs["numbers"] = {k: torch.tensor(v, dtype=torch.float32) for k, v in numbers.items()}
    conditioned = poutine.condition(program, data=values)
    pyro.set_rng_seed(0)
    with torch.no_grad():
        return float(poutine.trace(conditioned).get_trace(x, y, **kwargs).log_prob_sum())


def test_the_numbers_are_the_known_noise_and_each_normal_sites_std() -> None:
    spec = _model(noise=0.3, prior_scale=(0.5, 2.0)).spec
    assert model_numbers(spec) == {"w0": 0.5, "b0": 0.5, "w1": 2.0, "b1": 2.0, NOISE_NUMBER: 0.3}
    bare = numberless(spec)
    assert model_numbers(bare) == {"w0": 1.0, "b0": 1.0, "w1": 1.0, "b1": 1.0, NOISE_NUMBER: 1.0}
    assert bare.layers == spec.layers
    # Two specs that differ only in their numbers have one numberless spec.
    assert numberless(_model(noise=0.7, prior_scale=3.0).spec) == bare


def test_learned_noise_other_priors_and_classes_keep_their_numbers_in_the_spec() -> None:
    learned = _model(noise="learned").spec
    assert NOISE_NUMBER not in model_numbers(learned)
    assert numberless(learned) == learned
    mixture = ScaleMixture(0.3, 1.5, 0.05)
    spec = _model(noise=0.3, prior=(mixture, Normal(0.4))).spec
    assert model_numbers(spec) == {"w1": 0.4, "b1": 0.4, NOISE_NUMBER: 0.3}
    assert numberless(spec).priors == (mixture, Normal(1.0))
    horseshoe = _model(noise="learned", prior=Horseshoe(1.0)).spec
    assert model_numbers(horseshoe) == {}
    x = np.random.default_rng(0).normal(size=(20, 2))
    classes = BNN(x, np.arange(20) % 3, hidden=(4,), likelihood="categorical").spec
    assert NOISE_NUMBER not in model_numbers(classes)
    assert classes.noise is None and numberless(classes).noise is None


@pytest.mark.parametrize("backend", ["numpyro", "pyro"])
@pytest.mark.parametrize(
    "settings",
    [
        {"noise": 0.3, "prior_scale": (0.5, 2.0)},
        {"noise": 1.7, "prior": (ScaleMixture(0.3, 1.5, 0.05), Normal(0.4))},
        {"noise": "learned", "prior_scale": 0.7},
    ],
    ids=["normal", "mixture", "learned-noise"],
)
def test_the_numberless_program_given_the_numbers_has_the_specs_log_density(
    backend: str, settings: dict
) -> None:
    model = _model(**settings)
    spec, params = model.spec, _params(model.spec)
    own = _log_joint(backend, spec, model, params)
    numbers = model_numbers(spec)
    assert _log_joint(backend, spec, model, params, numbers=numbers) == pytest.approx(own, rel=1e-6)
    assert _log_joint(backend, numberless(spec), model, params, numbers=numbers) == (
        pytest.approx(own, rel=1e-6)
    )
    # The numbers reach the density: other numbers, another density.
    other = {k: 2.0 * v for k, v in numbers.items()}
    if other:
        changed = _log_joint(backend, numberless(spec), model, params, numbers=other)
        assert changed != pytest.approx(own, rel=1e-3)


@pytest.mark.parametrize("backend", ["numpyro", "pyro"])
def test_concrete_dropouts_weight_decay_takes_the_priors_std_from_the_numbers(
    backend: str,
) -> None:
    """Concrete dropout's regulariser scales the prior's weight term: given the numbers, it
    reads the prior's std from them, as the prior sites do (the masks drawn with seed 0)."""
    from ppl_bnn.engine.registry import get_backend

    model = _model(noise=0.3, prior_scale=0.5)
    spec, params = model.spec, _params(model.spec)
    ppl = get_backend(backend).ppl
    dropout = Dropout(0.1, concrete=True)
    own = _log_joint(backend, spec, model, params, network=dropout.network(spec, ppl))
    numbers, bare = model_numbers(spec), numberless(spec)
    given = _log_joint(backend, bare, model, params, network=dropout.network(bare, ppl),
                       numbers=numbers)  # fmt: skip
    assert given == pytest.approx(own, rel=1e-6)
