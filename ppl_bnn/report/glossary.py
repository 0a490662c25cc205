"""Labels, directions and one-line definitions of every quantity a report shows, and of the
reference posterior's terms (:data:`CONCEPTS`) with their sources."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Quantity:
    """How a metric is shown.

    Attributes:
        label: Short column title.
        definition: One line for "How to read this report".
        better: ``"higher"``, ``"lower"``, a nominal target value, or None (no ranking).
    """

    label: str
    definition: str
    better: str | float | None = None


QUANTITIES: dict[str, Quantity] = {
    # regression
    "test_ll": Quantity(
        "test LL",
        "mean over test points of log (1/S) sum_s N(y | f_s(x), sigma_s^2) (nats, original "
        "units; points where it is not finite are left out and counted); classification: -NLL",
        "higher",
    ),
    "rmse": Quantity("RMSE", "root mean squared error of the predictive mean", "lower"),
    "crps": Quantity(
        "CRPS", "continuous ranked probability score of the predictive mixture", "lower"
    ),
    "coverage_50": Quantity(
        "cov 50%", "share of test targets inside the central 50% predictive interval", 0.5
    ),
    "coverage_90": Quantity("cov 90%", "as above for the central 90% interval", 0.9),
    "coverage_95": Quantity("cov 95%", "as above for the central 95% interval", 0.95),
    "epistemic_std": Quantity(
        "epist. std", "mean over test points of the spread of f_s(x) across draws"
    ),
    "total_std": Quantity("total std", "mean predictive std: epistemic spread plus noise"),
    "epistemic_std_ratio": Quantity(
        "epist. std _out/_in",
        "epistemic std on the outside part of the test set over that on the inside part: near 1 "
        "when a fit is as sure far from its data as near it",
    ),
    "mean_interval_width_95": Quantity("width 95%", "mean width of the central 95% interval"),
    "n_nonfinite_ll": Quantity("non-finite LL", "test points whose log-likelihood is not finite"),
    # classification
    "accuracy": Quantity(
        "accuracy", "share of test points whose most probable class is right", "higher"
    ),
    "nll": Quantity("NLL", "mean negative log predictive probability of the true class", "lower"),
    "brier": Quantity(
        "Brier", "mean squared distance of predictive probabilities to the one-hot label", "lower"
    ),
    "ece": Quantity("ECE", "expected calibration error over 15 confidence bins", "lower"),
    "mean_entropy": Quantity("entropy", "mean predictive entropy on the test set (nats)"),
    "ood_auroc": Quantity(
        "OOD AUROC",
        "AUROC telling out-of-distribution from test inputs by predictive entropy",
        "higher",
    ),
    "ood_mean_entropy": Quantity("OOD entropy", "mean predictive entropy on the OOD inputs"),
    "n_nonfinite_nll": Quantity("non-finite NLL", "test points whose NLL is not finite"),
    "refused_test": Quantity(
        "refused test", "share of test inputs whose largest class probability is below 0.2"
    ),
    "refused_ood": Quantity("refused OOD", "as refused test, on the out-of-distribution inputs"),
    "refused_noise": Quantity(
        "refused noise",
        "as refused test, on uniform-noise inputs (the OOD inputs' shape, the training inputs' "
        "range, a fixed seed)",
    ),
    "noise_mean_entropy": Quantity(
        "noise entropy", "mean predictive entropy on the uniform-noise inputs"
    ),
    # samplers
    "rhat_max": Quantity(
        "R̂ max",
        "largest rank-normalised split R-hat over test predictions (≈1 when chains agree; a "
        "single chain is compared across its halves)",
    ),
    "rhat_median": Quantity("R̂ median", "median split R-hat over test predictions"),
    "ess_bulk_min": Quantity(
        "ESS bulk min", "smallest bulk effective sample size over test predictions"
    ),
    "ess_bulk_median": Quantity("ESS bulk med", "median bulk ESS over test predictions"),
    "ess_tail_min": Quantity("ESS tail min", "smallest tail ESS over test predictions"),
    "divergences": Quantity("divergences", "divergent transitions after warmup"),
    "divergence_rate": Quantity("div. rate", "share of draws that diverged"),
    "max_tree_depth_share": Quantity(
        "max-depth share", "share of NUTS draws that hit the maximum tree depth"
    ),
    "ebfmi_min": Quantity(
        "E-BFMI min",
        "smallest energy Bayesian fraction of missing information over chains (< 0.3 is poor)",
    ),
    "mean_acceptance": Quantity("accept", "mean acceptance probability"),
    "num_grads": Quantity("gradients", "gradient evaluations of the log density"),
    # cost
    "s_per_grad": Quantity(
        "s/grad", "sampling seconds per gradient evaluation (leapfrog step)", "lower"
    ),
    "s_per_step": Quantity(
        "s/step", "seconds of optimisation or SG-MCMC (warmup + sampling) per step", "lower"
    ),
    "ess_per_s": Quantity(
        "ESS/s", "median bulk ESS of test predictions per second of warmup + sampling", "higher"
    ),
    "ess_per_1000_grads": Quantity(
        "ESS/1000 grads",
        "median bulk ESS of test predictions per 1000 gradient evaluations",
        "higher",
    ),
    # timings (columns time_<key>)
    "time_total": Quantity("fit s", "wall seconds of the whole fit", "lower"),
    "time_compile": Quantity("compile s", "JIT compilation / tracing seconds"),
    "time_warmup": Quantity("warmup s", "MCMC warmup or optimisation seconds"),
    "time_sampling": Quantity("sampling s", "seconds drawing from the (approximate) posterior"),
    "time_predict": Quantity("predict s", "seconds predicting at the test inputs"),
    "time_cell_wall": Quantity("cell wall s", "wall seconds of the cell's process"),
    "time_tuning": Quantity(
        "tuning s",
        "seconds choosing a tuned contestant's settings: every fit of its grid on the "
        "validation split, apart from the final fit",
    ),
    # against a reference posterior
    "ref_w2": Quantity(
        "W2 to ref.",
        "2-Wasserstein distance between the predictive marginal and the reference posterior's, "
        "mean over test points (original units)",
        "lower",
    ),
    "ref_ks": Quantity(
        "KS to ref.",
        "Kolmogorov-Smirnov distance between the predictive marginal and the reference's, mean "
        "over test points",
        "lower",
    ),
    "ref_std_ratio": Quantity(
        "std / ref. std",
        "predictive std over the reference's, geometric mean over test points (< 1: "
        "over-confident, > 1: under-confident)",
    ),
    "ref_std_ratio_in": Quantity("std / ref. std _in", "as above, on the inside part"),
    "ref_std_ratio_out": Quantity("std / ref. std _out", "as above, on the outside part"),
    "ref_agreement": Quantity(
        "agreement",
        "share of test points where the most probable class matches the reference's",
        "higher",
    ),
    "ref_tv": Quantity(
        "TV to ref.",
        "total variation between predictive class distributions and the reference's, mean "
        "over test points",
        "lower",
    ),
    "ref_floor_ratio": Quantity(
        "\u00d7 the floor",
        "the distance to the reference (W2 to ref. for regression, TV to ref. for "
        "classification) over the reference's floor, mean over a contestant's cells, shown "
        'beside the distance as "k\u00d7 the floor"; at most 1, the contestant is '
        "indistinguishable from the reference",
        "lower",
    ),
    # against a constant predictor
    "train_ll": Quantity(
        "train LL", "mean log predictive density of the training targets (original units)"
    ),
    "baseline_test_ll": Quantity(
        "constant test LL",
        "test LL of a constant predictor fitted to the training targets (Gaussian; class "
        "frequencies): a usable fit beats it",
    ),
    "baseline_test_ll_in": Quantity(
        "constant test LL _in",
        "as above, on the inside part of the test set: where a set has parts, a usable fit "
        "beats it there",
    ),
    "baseline_train_ll": Quantity("constant train LL", "its training LL"),
}

REGRESSION_MAIN = (
    "test_ll", "rmse", "crps", "coverage_50", "coverage_90", "coverage_95", "epistemic_std",
    "total_std",
)  # fmt: skip
CLASSIFICATION_MAIN = (
    "accuracy", "nll", "brier", "ece", "ood_auroc", "mean_entropy", "ood_mean_entropy",
)  # fmt: skip
TIMES_MAIN = ("time_total", "time_compile")
REGRESSION_FIDELITY = ("ref_w2", "ref_ks", "ref_std_ratio")
REGRESSION_FIDELITY_ALL = (*REGRESSION_FIDELITY, "ref_std_ratio_in", "ref_std_ratio_out")
CLASSIFICATION_FIDELITY = ("ref_agreement", "ref_tv")
#: Metrics scored on each part of a test set that reaches beyond the training inputs.
REGION_MAIN = ("test_ll", "rmse", "coverage_95", "epistemic_std")
SAMPLER_METRICS = (
    "rhat_max", "rhat_median", "ess_bulk_min", "ess_tail_min", "divergences", "divergence_rate",
    "max_tree_depth_share", "ebfmi_min", "mean_acceptance", "num_grads",
)  # fmt: skip
COST_METRICS = ("s_per_grad", "s_per_step", "ess_per_s", "ess_per_1000_grads")


def _by_region(key: str, part: str) -> Quantity:
    """``key`` scored on one part of a test set (``part``: ``in`` or ``out``)."""
    base = QUANTITIES[key]
    where = "inside" if part == "in" else "outside"
    return Quantity(
        f"{base.label} _{part}",
        f"as {base.label}, on the {where} part of the test set",
        base.better,
    )


QUANTITIES.update(
    {f"{key}_{part}": _by_region(key, part) for key in REGION_MAIN for part in ("in", "out")}
)


def label(key: str) -> str:
    """The column title of ``key`` (the key itself when unknown)."""
    quantity = QUANTITIES.get(key)
    return quantity.label if quantity else key


def better(key: str) -> str | float | None:
    """Which way ``key`` improves: ``"higher"``, ``"lower"``, a target value, or None."""
    quantity = QUANTITIES.get(key)
    return quantity.better if quantity else None


@dataclass(frozen=True)
class Citation:
    """A source: its short name (``Izmailov et al. 2021``), its title and venue, and where it
    is (None: cited by title alone)."""

    short: str
    title: str
    url: str | None = None


IZMAILOV_2021 = Citation(
    "Izmailov et al. 2021",
    "What are Bayesian neural network posteriors really like? (ICML 2021)",
    "https://arxiv.org/abs/2104.14421",
)
SOMMER_2024 = Citation(
    "Sommer et al. 2024",
    "Connecting the Dots: Is Mode-Connectedness the Key to Feasible Sample-Based Inference in "
    "Bayesian Neural Networks? (ICML 2024; DEI-MCMC)",
)
SOMMER_2025 = Citation(
    "Sommer et al. 2025",
    "Microcanonical Langevin Ensembles: Advancing the Sampling of Bayesian Neural Networks "
    "(ICLR 2025; MILE)",
)


@dataclass(frozen=True)
class Concept:
    """A term of the report that is not a column: its name, one definition, its sources."""

    label: str
    definition: str
    citations: tuple[Citation, ...] = ()


#: The reference posterior's terms, defined under "How to read this report" where a suite has
#: references.
CONCEPTS: dict[str, Concept] = {
    "chain ensemble": Concept(
        "chain ensemble",
        "the reference posterior: K chains (MCLMC or NUTS, on NumPyro), each started at its own "
        "member of a deep ensemble and exploring the mode it starts in, sampled in batches "
        "until its floor reaches a target, its chains a number or its time a budget. Each "
        "chain is judged on its own in function space (split-R-hat and bulk ESS of its test "
        "predictions and training log-likelihood), and stuck chains (frozen, not finite, or "
        "worse than a constant predictor on their training data) are dropped and counted. No "
        "chain crosses between a BNN's modes, so R-hat across chains is never near 1: it is "
        "kept as a measure of how multimodal the posterior is, not of convergence. "
        "Deep-ensemble starts, per-chain diagnostics and dropping stuck chains follow DEI-MCMC; "
        "ensemble starts followed by MCLMC follow MILE",
        (SOMMER_2024, SOMMER_2025),
    ),
    "floor": Concept(
        "floor",
        "the distance between two disjoint halves of the reference's kept chains (alternate "
        "chains), measured with exactly the contestants' fidelity metric and sample sizes: W2 "
        "for regression (original units, and the model's standardised units), total "
        "variation (and agreement) for classification. It is the distance between two "
        "independent references of half the chains each, so a contestant whose distance to "
        "the reference is within it cannot be told from the reference: each distance is shown "
        'as "k\u00d7 the floor", and one within the floor reads "indistinguishable from the '
        'reference". The same statistic on a random split of the pooled draws (the '
        "random-split floor) is its Monte Carlo part alone. A floor needs at least 4 kept "
        "chains; fidelity ranks only where every reference that could be computed has one. "
        "How far independent runs lie from each other is the yardstick Izmailov et al. judge "
        "their HMC reference by",
        (IZMAILOV_2021,),
    ),
}
