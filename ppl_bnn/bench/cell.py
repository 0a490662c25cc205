"""What the runner runs, each in its own process: a :class:`Cell` (one fit on one dataset split,
evaluated) or a :class:`Probe` (one performance measurement); the part of its record known
before it runs (:func:`base_record`) and the model keywords a cell's data fixes
(:func:`model_arguments`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Self

from ppl_bnn.bench.environment import machine_info, timestamp
from ppl_bnn.bench.evaluate import STORED_DRAWS
from ppl_bnn.bench.record import SCHEMA_VERSION
from ppl_bnn.model.layers import Layer, layer_from_dict
from ppl_bnn.model.priors import Prior, prior_from_dict
from ppl_bnn.model.spec import BNNSpec


class _Runnable:
    """What cells and probes share: a config hash for resuming and a plain-dict form for
    sending to another process."""

    def config(self) -> dict[str, Any]:
        raise NotImplementedError

    def config_hash(self) -> str:
        """SHA-256 of the canonical JSON of :meth:`config` and the record schema version."""
        payload = json.dumps({"schema": SCHEMA_VERSION, **self.config()}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        return cls(**data)


@dataclass(frozen=True)
class Cell(_Runnable):
    """One fit to run and evaluate.

    Attributes:
        suite: Name of the suite the cell belongs to.
        dataset: Dataset name (see :func:`ppl_bnn.data.dataset_names`).
        split: Train/test split index.
        method, backend, seed: What :func:`ppl_bnn.fit` is called with.
        model: Keyword arguments of :class:`ppl_bnn.BNN` other than the data and likelihood.
        options: Method options passed to ``fit``.
        data: Data limits passed to the loader (``max_train``, ``max_test``).
        stored_draws: Draws of the test predictive kept in ``predictions.nc`` (thinned evenly).
        timeout_s: Wall-clock limit of the cell's process.
        budget_note: Why this cell's budget differs from the suite's default, or None.
        variant: Which of several models fitted to the same dataset (``"lenet5"``), or None
            (the only one); it joins the cell id and the report's dataset label, and enters the
            config only when set, so cells without one keep their ids and config hashes.
        sweep: The option a study sweeps (``"kl_weight"``), or None: the cell is one point of
            the study, not a contestant; its value (in ``options``) joins the cell id
            (``sine-beta-split0-svi-numpyro-seed0-kl_weight0.1``). In the config only when set.
        tune: The grid its settings are chosen from on a validation split of its training set
            (``{"grid": {name: values}, "validation_fraction": 0.2}``, see
            :mod:`ppl_bnn.bench.tuning`), or None. A cell with a grid is the tuned contestant
            ``"<method> (tuned)"`` (:attr:`contestant`), and ``-tuned`` follows the method in
            its id (``diabetes-split0-map-tuned-numpyro-seed0``). In the config only when set.
        reference: The settings of the reference posterior the cell samples
            (:meth:`ppl_bnn.reference.ReferenceSettings.as_dict`, its timeout aside), or None:
            the cell samples a chain ensemble (:func:`ppl_bnn.reference.sample.sample_reference`)
            with ``method`` as its engine, not one fit. In the config only when set.
        xla_optimisation: How hard XLA optimises the cell's programs
            (:data:`ppl_bnn.engine.xla.XLA_OPTIMISATION`), set by its suite for a backend whose
            programs XLA compiles; None: as the worker's process has it (XLA's defaults,
            unless ``$XLA_FLAGS`` says otherwise). The cell runs on a worker started with it.
            In the config only when set: it may change the last bits of what the fit computes.
    """

    suite: str
    dataset: str
    split: int
    method: str
    backend: str
    seed: int
    model: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    stored_draws: int = STORED_DRAWS
    timeout_s: float = 600.0
    budget_note: str | None = None
    variant: str | None = None
    sweep: str | None = None
    tune: dict[str, Any] | None = None
    reference: dict[str, Any] | None = None
    xla_optimisation: str | None = None

    @property
    def cell_id(self) -> str:
        """Directory-safe identifier, unique within a suite."""
        method = self.method if self.tune is None else f"{self.method}-tuned"
        base = (
            f"{self.label.replace('/', '-')}-split{self.split}-{method}-{self.backend}"
            f"-seed{self.seed}"
        )
        if self.sweep is None:
            return base
        return f"{base}-{self.sweep}{sweep_value_text(self.options[self.sweep])}"

    @property
    def label(self) -> str:
        """The dataset as reports name it: ``mnist``, or ``mnist/lenet5`` for a variant."""
        return dataset_label(self.dataset, self.variant)

    @property
    def contestant(self) -> str:
        """The method as reports name it: ``map``, or ``map (tuned)`` for a tuned cell."""
        return contestant_label(self.method, self.tune is not None)

    def config(self) -> dict[str, Any]:
        """Everything that determines the cell's result (the timeout and note do not; the
        variant, sweep and tuning grid only when set; a data file by its content hash, not
        where it lies)."""
        out = asdict(self)
        for key in ("suite", "timeout_s", "budget_note"):
            out.pop(key)
        if "file" in out["data"]:
            file = out["data"]["file"]
            out["data"]["file"] = {k: v for k, v in file.items() if k not in FILE_PLACES}
        for key in ("variant", "sweep", "tune", "reference", "xla_optimisation"):
            if out[key] is None:
                out.pop(key)
        return out


#: Where a data file lies: how a cell finds it, not what it holds (its SHA-256 says that).
FILE_PLACES = ("path", "test_path")


def sweep_value_text(value: Any) -> str:
    """A swept number as it joins a cell id: ``1``, ``0.1``, ``0.0001`` (Python's shortest
    round-trip form, so distinct values give distinct ids)."""
    return repr(value) if isinstance(value, int) else repr(float(value))


#: What follows a tuned contestant's method name in reports.
TUNED_SUFFIX = " (tuned)"


def contestant_label(method: str, tuned: bool) -> str:
    """``method``, or ``method (tuned)`` for the contestant whose settings are tuned."""
    return f"{method}{TUNED_SUFFIX}" if tuned else method


def base_method(contestant: str) -> str:
    """The method behind a contestant label (``map (tuned)`` -> ``map``)."""
    return contestant.removesuffix(TUNED_SUFFIX)


def dataset_label(dataset: str, variant: str | None) -> str:
    """``dataset``, or ``dataset/variant`` when a suite fits several models to it."""
    return dataset if not variant else f"{dataset}/{variant}"


PROBE_KINDS = (
    "floor",
    "method",
    "overhead",
    "predict",
    "scaling",
    "throughput",
    "compile_cache",
    "conv",
)


@dataclass(frozen=True)
class Probe(_Runnable):
    """One measurement to run in its own process.

    Attributes:
        suite: Name of the suite.
        name: Identifier, unique within the suite (the directory of its record).
        kind: One of :data:`PROBE_KINDS`.
        params: Everything the measurement needs (problem, options, repeats, ...).
        timeout_s: Wall-clock limit of the probe's process.
        budget_note: Why this probe's budget differs, or None.
    """

    suite: str
    name: str
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 600.0
    budget_note: str | None = None

    @property
    def cell_id(self) -> str:
        return self.name

    @property
    def dataset(self) -> str:
        return str(self.params.get("dataset", ""))

    @property
    def method(self) -> str:
        return str(self.params.get("method", self.kind))

    @property
    def backend(self) -> str:
        return str(self.params.get("backend", ""))

    def config(self) -> dict[str, Any]:
        return {"kind": self.kind, "params": self.params}

    def host_devices(self, threads: int) -> int:
        """XLA host devices of the probe's process: prediction spreads draws over them, the
        other probes time one device."""
        return threads if self.kind == "predict" else 1


def cell_from_dict(data: dict[str, Any]) -> Cell | Probe:
    """A :class:`Cell` or :class:`Probe` from its :meth:`to_dict` form."""
    return Probe.from_dict(data) if "kind" in data else Cell.from_dict(data)


def base_record(cell: Cell | Probe, attempt: int = 1) -> dict[str, Any]:
    """The part of a record known before the cell runs (``attempt``: see
    :func:`ppl_bnn.bench.record.next_attempt`)."""
    return {
        "cell_id": cell.cell_id,
        "suite": cell.suite,
        "config": cell.config(),
        "config_hash": cell.config_hash(),
        "attempt": attempt,
        "budget_note": cell.budget_note,
        "timeout_s": cell.timeout_s,
        "status": "failed",
        "error": None,
        "metrics": {},
        "curves": {},
        "timings": {},
        "info": {},
        "versions": {},
        "machine": machine_info(),
        "started_at": timestamp(),
        "finished_at": None,
        "files": {},
    }


def model_table(spec: BNNSpec) -> dict[str, Any]:
    """The ``[model]`` table of ``spec``, as cells carry a model to their workers: its layers
    and priors in their dict form, and for a Gaussian likelihood its noise (and noise prior).
    :func:`model_arguments` makes the spec's :class:`~ppl_bnn.BNN` of it again."""
    priors = [p.to_dict() for p in spec.priors]
    table: dict[str, Any] = {
        "layers": [layer.to_dict() for layer in spec.layers],
        "prior": priors[0] if all(p == priors[0] for p in priors) else priors,
    }
    if spec.likelihood == "gaussian":
        table["noise"] = spec.noise
        if spec.noise_prior is not None:
            table["noise_prior"] = spec.noise_prior.to_dict()
    return table


def model_arguments(model: dict[str, Any], data: Any) -> dict[str, Any]:
    """:class:`ppl_bnn.BNN` keywords for ``data``: the likelihood follows the task; ``noise``
    applies to regression only and defaults to ``"learned"``; ``noise_prior`` is given in its
    dict form (``{kind = "gamma", concentration = 6.0, rate = 6.0}``), ``prior`` (the weights'
    and biases' prior, instead of ``prior_scale``) likewise, one table or one per layer, and
    ``layers`` as a list of the layers' own dict form (:func:`ppl_bnn.model.layers.layer_from_dict`,
    ``{kind = "conv2d", out_channels = 6, kernel_size = 5, padding = "same"}``)."""
    skip = ("noise", "noise_prior", "prior", "layers")
    kwargs = {k: v for k, v in model.items() if k not in skip}
    if model.get("prior") is not None:
        kwargs["prior"] = weight_prior(model["prior"])
    if model.get("layers") is not None:
        kwargs["layers"] = network_layers(model["layers"])
    if data.task != "regression":
        return {**kwargs, "likelihood": "categorical", "num_classes": data.num_classes}
    if model.get("noise_prior") is not None:
        kwargs["noise_prior"] = prior_from_dict(model["noise_prior"])
    return {**kwargs, "likelihood": "gaussian", "noise": model.get("noise", "learned")}


def network_layers(tables: Any) -> list[Layer]:
    """A suite's ``layers``: a non-empty list of layer tables, as layer objects."""
    if not isinstance(tables, list) or not all(isinstance(t, Mapping) for t in tables or [1]):
        raise TypeError(f"layers must be a non-empty list of layer tables, got {tables!r}")
    return [layer_from_dict(dict(t)) for t in tables]


def merge_model(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """A dataset's model: the suite's ``[model]`` updated by the dataset's ``model``. When the
    override gives ``layers``, the suite's MLP shorthand (``hidden``, ``activation``,
    ``prior_scale``, ``fan_in_scaling``) does not apply to it, nor its ``prior`` unless the
    override leaves the prior out."""
    if "layers" not in override:
        return {**base, **override}
    kept = {k: v for k, v in base.items() if k not in MLP_SHORTHAND}
    if any(k in override for k in ("prior_scale", "fan_in_scaling")):
        kept.pop("prior", None)
    return {**kept, **override}


#: The ``[model]`` keys of the MLP shorthand, which ``layers`` replaces.
MLP_SHORTHAND = ("hidden", "activation", "prior_scale", "fan_in_scaling")


def weight_prior(table: Any) -> Prior | list[Prior]:
    """A suite's ``prior``: one prior table (``{kind = "scale_mixture", pi = 0.2, ...}``) or a
    list of them, one per layer, as prior objects."""
    if isinstance(table, Mapping):
        return prior_from_dict(dict(table))
    if isinstance(table, list) and table and all(isinstance(t, Mapping) for t in table):
        return [prior_from_dict(dict(t)) for t in table]
    raise TypeError(f"a prior is a table or a list of tables (one per layer), got {table!r}")
