"""Evaluation of one fit: metrics in original units, curves, stored predictions, costs."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, fit, layers, metrics
from ppl_bnn.bench.evaluate import (
    PRUNE_FRACTIONS,
    REFUSE_BELOW,
    evaluate,
    noise_inputs,
    predictions_dataset,
)
from ppl_bnn.data import load_dataset


@pytest.fixture(scope="module")
def sine():
    return load_dataset("sine", split=0)


@pytest.fixture(scope="module")
def svi_fit(sine):
    model = BNN(sine.x_train, sine.y_train, hidden=(4,), noise="learned")
    return fit(model, "svi", num_steps=300, num_draws=60, seed=1)


def test_regression_metrics_are_in_original_units(sine, svi_fit) -> None:
    out = evaluate(svi_fit, sine)
    pred = svi_fit.predict(sine.x_test)
    y = sine.y_test * sine.y_std + sine.y_mean
    # A change of units y -> a + b y shifts every log density by -log b.
    expected_ll = pred.mean_log_predictive_density(sine.y_test) - np.log(sine.y_std)
    # The two paths round differently in float64, and at test points far outside the training
    # range a draw's z**2 reaches 1e6-1e8, which lifts that rounding to ~1e-9 of the mean.
    assert out.metrics["test_ll"] == pytest.approx(expected_ll, rel=1e-7)
    expected_rmse = np.sqrt(np.mean((pred.mean * sine.y_std + sine.y_mean - y) ** 2))
    assert out.metrics["rmse"] == pytest.approx(expected_rmse, rel=1e-6)  # float32 draws
    assert out.metrics["n_nonfinite_ll"] == 0
    assert out.metrics["s_per_step"] == pytest.approx(
        (svi_fit.timings["warmup"] + svi_fit.timings["sampling"]) / 300
    )
    stored = out.predictions
    np.testing.assert_allclose(stored["test_y"][1], y)
    np.testing.assert_allclose(
        stored["test_mean"][1], pred.mean * sine.y_std + sine.y_mean, rtol=1e-5
    )
    assert stored["test_f"][1].shape == (60, sine.n_test)  # fewer than 200 draws: all kept
    assert stored["grid_x"][1].min() == pytest.approx(-1.5, abs=1e-6)
    np.testing.assert_allclose(stored["train_y"][1], sine.y_to_original(sine.y_train))
    assert stored["loss"][1].shape == (300,)
    coverage = out.curves["coverage"]
    assert len(coverage["nominal"]) == len(coverage["empirical"])
    pruning = out.curves["pruning"]
    assert pruning["fraction"] == list(PRUNE_FRACTIONS)
    assert pruning["test_ll"][0] == pytest.approx(out.metrics["test_ll"], rel=1e-6)
    assert pruning["rmse"][0] == pytest.approx(out.metrics["rmse"], rel=1e-6)
    assert "rhat_max" not in out.metrics  # not a sampler
    dataset = predictions_dataset(out, {"cell_id": "x"})
    assert dataset.attrs["cell_id"] == "x" and dataset["test_f"].dims == ("draw", "test")


def test_classification_metrics_and_ood() -> None:
    digits = load_dataset("digits", split=0, max_train=300, max_test=100)
    model = BNN(
        digits.x_train, digits.y_train, hidden=(8,), likelihood="categorical", num_classes=10
    )
    result = fit(model, "map", num_steps=300)
    out = evaluate(result, digits)
    probs = result.predict(digits.x_test).probs
    assert out.metrics["accuracy"] == pytest.approx(np.mean(probs.argmax(-1) == digits.y_test))
    assert 0.0 <= out.metrics["ood_auroc"] <= 1.0
    assert sum(out.curves["reliability"]["count"]) == digits.n_test
    assert out.predictions["test_mean_probs"][1].shape == (digits.n_test, 10)
    assert out.predictions["ood_entropy"][1].shape == (digits.x_ood.shape[0],)
    assert "pruning" not in out.curves  # MAP has no guide scales


@pytest.mark.parametrize("image", [False, True], ids=["flat", "image"])
def test_refusals_on_test_ood_and_noise_inputs(image: bool) -> None:
    digits = load_dataset("digits", split=0, max_train=300, max_test=60, image=image)
    network = [layers.Flatten(), layers.Dense(8, "tanh"), layers.Dense(10)] if image else None
    model = BNN(
        digits.x_train,
        digits.y_train,
        **({"layers": network} if image else {"hidden": (8,)}),
        likelihood="categorical",
        num_classes=10,
    )
    result = fit(model, "map", num_steps=200, seed=0)
    out = evaluate(result, digits)
    noise = noise_inputs(digits)
    # Same shape as the OOD inputs, on the training inputs' range (pixels in [0, 1]), and the
    # same draw every time.
    assert noise.shape == digits.x_ood.shape
    assert noise.min() >= digits.x_train.min() and noise.max() <= digits.x_train.max() == 1.0
    assert np.array_equal(noise, noise_inputs(digits))
    noise_probs = result.predict(noise).probs
    ood_probs = result.predict(digits.x_ood).probs
    test_probs = result.predict(digits.x_test).probs
    for name, probs in (("test", test_probs), ("ood", ood_probs), ("noise", noise_probs)):
        expected = np.mean(probs.max(axis=-1) < REFUSE_BELOW)
        assert out.metrics[f"refused_{name}"] == pytest.approx(expected), name
    np.testing.assert_allclose(out.predictions["noise_p_max"][1], noise_probs.max(axis=-1))
    np.testing.assert_allclose(out.predictions["ood_p_max"][1], ood_probs.max(axis=-1))
    assert out.predictions["noise_p_max"][0] == ("noise",)
    assert out.metrics["noise_mean_entropy"] == pytest.approx(
        np.mean(metrics.predictive_entropy(noise_probs))
    )


def test_sampler_costs_and_diagnostics(sine) -> None:
    model = BNN(sine.x_train, sine.y_train, hidden=(3,), noise="learned")
    result = fit(model, "nuts", num_warmup=40, num_samples=40, num_chains=2, max_tree_depth=4)
    out = evaluate(result, sine)
    grads = int(result.sample_stats["n_steps"].sum())
    assert out.metrics["num_grads"] == grads
    assert out.metrics["s_per_grad"] == pytest.approx(result.timings["sampling"] / grads)
    assert out.metrics["rhat_max"] >= 1.0 > 0 < out.metrics["ess_bulk_min"]
    assert 0.0 <= out.metrics["max_tree_depth_share"] <= 1.0
    assert "ess_per_s" in out.metrics


def test_sine_is_scored_in_range_and_out_of_range(sine, svi_fit) -> None:
    out = evaluate(svi_fit, sine)
    assert out.regions == {"in": "in range", "out": "out of range"}
    inside = np.abs(sine.x_to_original(sine.x_test)[:, 0]) <= 0.5
    assert out.metrics["n_test_in"] == inside.sum() and out.metrics["n_test_out"] == (~inside).sum()
    pred = svi_fit.predict(sine.x_test[inside])
    expected = pred.mean_log_predictive_density(sine.y_test[inside]) - np.log(sine.y_std)
    assert out.metrics["test_ll_in"] == pytest.approx(expected, rel=1e-6)  # float32 draws
    f_std = svi_fit.predict(sine.x_test[~inside]).epistemic_std.mean() * sine.y_std
    assert out.metrics["epistemic_std_out"] == pytest.approx(f_std, rel=1e-5)
    f_std_in = svi_fit.predict(sine.x_test[inside]).epistemic_std.mean() * sine.y_std
    assert out.metrics["epistemic_std_ratio"] == pytest.approx(f_std / f_std_in, rel=1e-5)


def test_a_fit_that_learned_nothing_is_flagged_and_a_good_one_is_not(sine) -> None:
    """The constant predictor's scores in closed form, and the checks against them. The test
    check looks where the training inputs lie: MAP's fit is good in range and far too sure out
    of range, where its whole-set test LL falls far below the constant's, and it is usable (its
    over-confidence is judged against the reference)."""
    model = BNN(sine.x_train, sine.y_train, hidden=(10,), noise="learned")
    good = evaluate(fit(model, "map", num_steps=1500, learning_rate=0.02, seed=0), sine)
    # Zero steps: the prior draw at the initial point predicts nothing about y.
    bad = evaluate(fit(model, "map", num_steps=1, learning_rate=1e-6, seed=0), sine)
    y_train = sine.y_to_original(sine.y_train)

    def constant_ll(y: np.ndarray) -> float:
        z = (y - y_train.mean()) / y_train.std()
        return float(np.mean(-0.5 * z**2 - np.log(y_train.std() * np.sqrt(2 * np.pi))))

    y_in = sine.y_to_original(sine.y_test)[sine.test_inside]
    for out in (good, bad):
        assert out.metrics["baseline_train_ll"] == pytest.approx(constant_ll(y_train), rel=1e-9)
        assert out.metrics["baseline_test_ll_in"] == pytest.approx(constant_ll(y_in), rel=1e-9)
    assert good.metrics["train_ll"] > good.metrics["baseline_train_ll"]
    assert good.metrics["test_ll_in"] > good.metrics["baseline_test_ll_in"]
    assert good.metrics["test_ll"] < good.metrics["baseline_test_ll"] - 10
    assert good.flags == []
    assert bad.metrics["train_ll"] < bad.metrics["baseline_train_ll"]
    assert bad.metrics["test_ll_in"] < bad.metrics["baseline_test_ll_in"]
    assert [f.split(" -")[0] for f in bad.flags] == [
        "test log-likelihood (in range)",
        "training log-likelihood",
    ]


def test_training_curve_is_stored_in_original_units(sine) -> None:
    """svi's training curve goes into curves["training"], the held-out log-likelihood (here the
    test set, as the worker passes it) shifted to original units as test_ll is."""
    model = BNN(sine.x_train, sine.y_train, hidden=(4,), noise="learned")
    result = fit(
        model,
        "svi",
        backend="pyro",
        num_steps=60,
        num_draws=10,
        seed=1,
        validation=(sine.x_test, sine.y_test),
    )
    stored = result.info["training_curve"]
    training = evaluate(result, sine).curves["training"]
    assert training["held_out"] == "test"
    assert training["step"] == stored["step"] == list(range(1, 61))
    np.testing.assert_allclose(
        training["held_out_ll"], np.asarray(stored["held_out_ll"]) - np.log(sine.y_std)
    )
    for key in ("loss", "expected_log_lik", "kl", "kl_checkpoint", "kl_weight"):
        assert training[key] == stored[key]
    assert "training" not in evaluate(fit(model, "map", backend="pyro", num_steps=5), sine).curves
