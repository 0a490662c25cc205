"""BNNSpec: validation, site layout, priors and serialisation (no PPL involved)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ppl_bnn.model.priors import PBP_NOISE_PRIOR, Gamma, Normal
from ppl_bnn.model.spec import ACTIVATIONS, DEFAULT_NOISE_PRIOR, LIKELIHOODS, BNNSpec


def gaussian(**kwargs: object) -> BNNSpec:
    kwargs.setdefault("input_dim", 2)
    kwargs.setdefault("noise", 0.1)
    return BNNSpec.mlp(**kwargs)


def categorical(**kwargs: object) -> BNNSpec:
    kwargs.setdefault("input_dim", 2)
    kwargs.setdefault("num_classes", 3)
    return BNNSpec.mlp(likelihood="categorical", **kwargs)


# --- validation ---------------------------------------------------------------------------------


def test_unknown_activation_lists_allowed_values() -> None:
    with pytest.raises(ValueError, match="unknown activation 'swish'") as info:
        gaussian(activation="swish")
    for name in ACTIVATIONS:
        assert name in str(info.value)


def test_unknown_likelihood_lists_allowed_values() -> None:
    with pytest.raises(ValueError, match="unknown likelihood 'poisson'") as info:
        BNNSpec.mlp(input_dim=2, likelihood="poisson")
    for name in LIKELIHOODS:
        assert name in str(info.value)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_every_listed_activation_is_accepted(activation: str) -> None:
    spec = gaussian(hidden=(3,), activation=activation)
    assert [layer.activation for layer in spec.layers] == [activation, None]


@pytest.mark.parametrize("input_dim", [0, -1, 1.0, True, "2"])
def test_bad_input_dim(input_dim: object) -> None:
    with pytest.raises(ValueError, match="input_dim must be a positive integer"):
        gaussian(input_dim=input_dim)


@pytest.mark.parametrize("hidden", [(0,), (5, -1), (2.5,), (True,), ("3",)])
def test_bad_hidden_widths(hidden: object) -> None:
    with pytest.raises(ValueError, match="hidden layer widths must be positive integers"):
        gaussian(hidden=hidden)


@pytest.mark.parametrize("hidden", ["10", 2.5, None])
def test_hidden_not_a_sequence(hidden: object) -> None:
    with pytest.raises(ValueError, match="hidden must be a sequence of layer widths"):
        gaussian(hidden=hidden)


def test_hidden_int_and_list_are_normalised_to_tuple() -> None:
    assert gaussian(hidden=7).hidden == (7,)
    assert gaussian(hidden=[4, 3]).hidden == (4, 3)


@pytest.mark.parametrize("prior_scale", [(1.0,), (1.0, 1.0, 1.0)])
def test_prior_scale_wrong_length(prior_scale: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match=r"prior_scale has \d values but the network has 2 layers"):
        gaussian(hidden=(4,), prior_scale=prior_scale)


@pytest.mark.parametrize(
    "prior_scale", [0.0, -1.0, (1.0, 0.0), (1.0, -2.0), math.inf, math.nan, (1.0, math.inf)]
)
def test_prior_scale_non_positive_or_non_finite(prior_scale: object) -> None:
    with pytest.raises(ValueError, match="prior_scale values must be finite and > 0"):
        gaussian(hidden=(4,), prior_scale=prior_scale)


@pytest.mark.parametrize("prior_scale", ["1.0", None, True])
def test_prior_scale_not_a_number(prior_scale: object) -> None:
    with pytest.raises(ValueError, match="prior_scale"):
        gaussian(hidden=(4,), prior_scale=prior_scale)


def test_prior_scale_sequence_with_non_number() -> None:
    with pytest.raises(ValueError, match="prior_scale values must be finite and > 0"):
        gaussian(hidden=(4,), prior_scale=(1.0, "2"))


@pytest.mark.parametrize("noise", [None, 0, 0.0, -0.1, math.inf, math.nan, "fixed", True])
def test_gaussian_needs_positive_noise_or_learned(noise: object) -> None:
    with pytest.raises(ValueError, match="gaussian likelihood needs noise"):
        BNNSpec.mlp(input_dim=1, noise=noise)


def test_gaussian_accepts_learned_noise_and_int_noise() -> None:
    assert BNNSpec.mlp(input_dim=1, noise="learned").learned_noise
    assert BNNSpec.mlp(input_dim=1, noise=1).noise == 1
    assert not BNNSpec.mlp(input_dim=1, noise=0.5).learned_noise


@pytest.mark.parametrize("num_classes", [None, 1, 0, -3, 2.0, True])
def test_categorical_needs_at_least_two_classes(num_classes: object) -> None:
    with pytest.raises(ValueError, match="categorical likelihood needs num_classes >= 2"):
        BNNSpec.mlp(input_dim=1, likelihood="categorical", num_classes=num_classes)


@pytest.mark.parametrize("noise", [0.1, "learned"])
def test_noise_with_categorical_is_rejected(noise: object) -> None:
    with pytest.raises(ValueError, match="noise applies to the gaussian likelihood only"):
        BNNSpec.mlp(input_dim=1, likelihood="categorical", num_classes=3, noise=noise)


def test_num_classes_with_gaussian_is_rejected() -> None:
    with pytest.raises(ValueError, match="num_classes applies to the categorical likelihood only"):
        BNNSpec.mlp(input_dim=1, noise=0.1, num_classes=3)


def test_spec_is_frozen() -> None:
    spec = gaussian()
    with pytest.raises(AttributeError):
        spec.input_dim = 5  # type: ignore[misc]


# --- sites --------------------------------------------------------------------------------------


def test_sites_regression_known_noise() -> None:
    spec = gaussian(input_dim=3, hidden=(5, 4))
    assert [(s.name, s.shape) for s in spec.sites()] == [
        ("w0", (3, 5)),
        ("b0", (5,)),
        ("w1", (5, 4)),
        ("b1", (4,)),
        ("w2", (4, 1)),
        ("b2", (1,)),
    ]
    assert spec.widths == (3, 5, 4, 1)
    assert spec.num_layers == 3
    assert spec.output_dim == 1
    assert not any(s.positive for s in spec.sites())
    assert [s.size for s in spec.sites()] == [15, 5, 20, 4, 4, 1]


def test_sites_learned_noise_ends_with_precision() -> None:
    spec = gaussian(input_dim=2, hidden=(3,), noise="learned")
    sites = spec.sites()
    assert [s.name for s in sites] == ["w0", "b0", "w1", "b1", "precision"]
    precision = sites[-1]
    assert precision.shape == ()
    assert precision.size == 1
    assert precision.positive
    assert precision.prior == DEFAULT_NOISE_PRIOR == Gamma(1.0, 0.1)
    assert spec.site_dims()["precision"] == []


def test_sites_categorical_output_width_is_num_classes() -> None:
    spec = categorical(input_dim=2, hidden=(6,), num_classes=4)
    assert [(s.name, s.shape) for s in spec.sites()] == [
        ("w0", (2, 6)),
        ("b0", (6,)),
        ("w1", (6, 4)),
        ("b1", (4,)),
    ]
    assert spec.output_dim == 4
    assert not spec.learned_noise


def test_sites_linear_model() -> None:
    spec = gaussian(input_dim=4, hidden=())
    assert [(s.name, s.shape) for s in spec.sites()] == [("w0", (4, 1)), ("b0", (1,))]


def test_site_dims_match_sites() -> None:
    spec = gaussian(input_dim=2, hidden=(3,), noise="learned")
    dims = spec.site_dims()
    assert list(dims) == [s.name for s in spec.sites()]
    assert dims["w0"] == ["layer0_in", "layer0_out"]
    assert dims["b1"] == ["layer1_out"]
    for site in spec.sites():
        assert len(dims[site.name]) == len(site.shape)


# --- prior scales -------------------------------------------------------------------------------


def test_scalar_prior_scale_applies_to_every_layer() -> None:
    spec = gaussian(input_dim=3, hidden=(5, 4), prior_scale=0.7)
    assert spec.layer_scales == (0.7, 0.7, 0.7)
    assert [s.prior for s in spec.sites()] == [Normal(0.7)] * 6


def test_per_layer_prior_scale() -> None:
    spec = gaussian(input_dim=3, hidden=(5,), prior_scale=(0.5, 2.0))
    assert spec.layer_scales == (0.5, 2.0)
    priors = {s.name: s.prior for s in spec.sites()}
    assert priors == {
        "w0": Normal(0.5),
        "b0": Normal(0.5),
        "w1": Normal(2.0),
        "b1": Normal(2.0),
    }


def test_fan_in_scaling_divides_by_sqrt_fan_in() -> None:
    spec = gaussian(input_dim=4, hidden=(9, 16), prior_scale=(1.0, 3.0, 2.0), fan_in_scaling=True)
    expected = (1.0 / math.sqrt(4), 3.0 / math.sqrt(9), 2.0 / math.sqrt(16))
    assert spec.layer_scales == pytest.approx(expected, rel=1e-12)
    assert [s.prior.scale for s in spec.sites()] == pytest.approx(
        [expected[0], expected[0], expected[1], expected[1], expected[2], expected[2]], rel=1e-12
    )


def test_fan_in_scaling_off_keeps_scales() -> None:
    spec = gaussian(input_dim=4, hidden=(9,), prior_scale=2.0, fan_in_scaling=False)
    assert spec.layer_scales == (2.0, 2.0)


# --- serialisation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        BNNSpec.mlp(input_dim=3, hidden=(5, 4), noise=0.1),
        BNNSpec.mlp(input_dim=1, hidden=(), noise="learned", activation="relu"),
        BNNSpec.mlp(
            input_dim=2,
            hidden=(8,),
            activation="gelu",
            prior_scale=(0.5, 1.5),
            fan_in_scaling=True,
            likelihood="categorical",
            num_classes=4,
        ),
    ],
    ids=["known-noise", "learned-noise", "categorical"],
)
def test_to_dict_from_dict_round_trip(spec: BNNSpec) -> None:
    data = spec.to_dict()
    restored = BNNSpec.from_dict(json.loads(json.dumps(data)))
    assert restored == spec
    assert restored.layer_scales == spec.layer_scales
    assert restored.sites() == spec.sites()
    assert hash(restored) == hash(spec)


def test_to_dict_contents() -> None:
    spec = BNNSpec.mlp(input_dim=2, hidden=(3,), prior_scale=(1.0, 2.0), noise="learned")
    assert spec.to_dict() == {
        "input_dim": 2,
        "layers": [
            {"kind": "dense", "units": 3, "activation": "tanh"},
            {"kind": "dense", "units": 1, "activation": None},
        ],
        "priors": [{"kind": "normal", "scale": 1.0}, {"kind": "normal", "scale": 2.0}],
        "likelihood": "gaussian",
        "noise": "learned",
        "num_classes": None,
        "noise_prior": {"kind": "gamma", "concentration": 1.0, "rate": 0.1},
    }


def test_from_dict_reads_the_mlp_form_written_before_layers_were_objects() -> None:
    old = {
        "input_dim": 2,
        "hidden": [3],
        "activation": "tanh",
        "prior_scale": [1.0, 2.0],
        "fan_in_scaling": False,
        "likelihood": "gaussian",
        "noise": "learned",
        "num_classes": None,
    }
    assert BNNSpec.from_dict(old) == BNNSpec.mlp(
        input_dim=2,
        hidden=(3,),
        prior_scale=(1.0, 2.0),
        noise="learned",
        noise_prior=PBP_NOISE_PRIOR,  # the only noise prior there was
    )


# --- the noise prior ----------------------------------------------------------------------------


def test_noise_prior_is_the_precision_sites_prior_and_round_trips() -> None:
    spec = gaussian(input_dim=2, hidden=(3,), noise="learned", noise_prior=PBP_NOISE_PRIOR)
    assert spec.sites()[-1].prior == Gamma(6.0, 6.0)
    assert spec != gaussian(input_dim=2, hidden=(3,), noise="learned")
    assert BNNSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_noise_prior_floor_is_far_below_pbps() -> None:
    """The documented floor b / (a + N/2 - 1) of the posterior mean of sigma^2, at N = 300."""

    def floor(prior: Gamma, n: int = 300) -> float:
        return prior.rate / (prior.concentration + n / 2 - 1)

    assert np.sqrt(floor(PBP_NOISE_PRIOR)) == pytest.approx(0.197, abs=1e-3)
    assert np.sqrt(floor(DEFAULT_NOISE_PRIOR)) == pytest.approx(0.0258, abs=1e-3)


@pytest.mark.parametrize(
    ("noise", "noise_prior", "message"),
    [
        (0.1, Gamma(1.0, 0.1), "noise_prior applies to noise='learned' only"),
        ("learned", Normal(1.0), r"noise_prior must be a prior on \(0, inf\)"),
        ("learned", (6.0, 6.0), r"noise_prior must be a prior on \(0, inf\)"),
    ],
)
def test_bad_noise_prior_is_rejected(noise, noise_prior, message) -> None:
    with pytest.raises(ValueError, match=message):
        gaussian(input_dim=2, hidden=(3,), noise=noise, noise_prior=noise_prior)


# --- import hygiene -----------------------------------------------------------------------------


def test_importing_spec_imports_neither_torch_nor_jax() -> None:
    code = (
        "import sys\n"
        "import ppl_bnn.model.spec\n"
        "heavy = sorted(m for m in ('torch', 'jax', 'jaxlib', 'pyro', 'numpyro') "
        "if m in sys.modules)\n"
        "print(','.join(heavy) or 'none')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert out.stdout.strip() == "none", out.stdout


def test_numpy_scalars_and_sequences_are_accepted_and_normalised() -> None:
    spec = BNNSpec.mlp(
        input_dim=np.int64(2),
        hidden=np.array([3, 4]),
        prior_scale=[1.0, np.float32(0.5), 2],
        noise=np.float32(0.1),
    )
    assert spec.hidden == (3, 4)
    assert spec.layer_scales == (1.0, 0.5, 2.0)
    assert all(isinstance(s, float) for s in spec.layer_scales)
    assert isinstance(spec.noise, float)
    hash(spec)  # usable as a cache key
    assert BNNSpec.from_dict(spec.to_dict()) == spec


def test_fan_in_scaling_must_be_bool() -> None:
    with pytest.raises(ValueError, match="fan_in_scaling must be True or False"):
        BNNSpec.mlp(input_dim=2, noise=0.1, fan_in_scaling="no")
