"""Benchmark suites: TOML files that expand into cells.

A suite names datasets (with splits and optional size limits), one model architecture (with
per-dataset overrides), methods with options, backends, seeds, a per-cell timeout (which a
dataset may override for its own cells) and, optionally, how its gold-standard reference
posteriors are sampled::

    name = "default"
    seeds = [0]                          # or "auto": seeds 0-2, more where the verdict needs
                                         # them, up to 10 (ppl_bnn.bench.auto_seeds)
    backends = ["numpyro", "pyro"]
    timeout_s = 600
    xla_optimisation = "low"             # optional: "full" or "low" for the cells of backends
                                         # whose programs XLA compiles (below)

    [reference]                          # optional: a reference posterior per (dataset,
    engine = "mclmc"                     # split), a chain ensemble cached by content (see
    num_chains = 512                     # ppl_bnn.reference); these are the defaults
    chains_per_batch = 16
    target_floor = 0.01
    max_seconds = 600
    seed = 0
    timeout_s = 1800

    [margins]                            # optional: how close counts as "as good"
    fidelity_ratio = 1.25                # (ppl_bnn.report.equivalence.Margins); these
    test_ll_nats = 0.05                  # are the defaults

    [model]                              # ppl_bnn.BNN keyword arguments; the likelihood
    hidden = [50]                        # follows the dataset's task; noise (regression
                                         # only) defaults to "learned"
    activation = "tanh"

    [[datasets]]
    name = "sine"
    splits = [0]                         # or "all"
    model = { hidden = [20, 20] }        # overrides [model]
    variant = "wide"                     # a name for this model when a set is listed twice
    image = true                         # image sets: inputs (N, H, W, 1), for layers = [...]
    exclude = ["laplace"]                # "method", "method.backend", "method.tuned" or
                                         # "method.untuned" (the method runs tuned only)
    options = { "sgld" = { step_size = 1e-4 } }   # keys "method" or "method.backend"
    no_reference = "why"                 # no reference posterior here, and why not
    timeout_s = 3600                     # its cells' limit, instead of the suite's (not its
                                         # reference's, which [reference] sets)
    sweep = { method = "svi", option = "kl_weight", values = [1.0, 0.1] }   # a study (below)

    [[datasets]]                         # a data file of your own (below)
    name = "housing"
    path = "data/housing.csv"            # relative to the suite file
    target = "price"
    test_fraction = 0.1                  # or test_path = "data/housing-test.csv"
    splits = 3                           # seeded random splits 0, 1, 2

    [methods.nuts]
    num_warmup = 500
    [methods.nuts.pyro]                  # backend-specific overrides ...
    num_warmup = 100
    budget_note = "..."                  # ... stated in the report

    [methods.map.tune]                   # a tuned contestant, "map (tuned)", beside "map"
    grid = { noise = [0.3, 1.0], prior_scale = [0.3, 1.0], num_steps = [1000, 4000] }
    validation_fraction = 0.2            # the default

Options merge in the order: method, method.backend, dataset's method, dataset's method.backend.

A cell's timeout is not part of its config hash (:meth:`ppl_bnn.bench.cell.Cell.config`), so
changing the suite's or a dataset's ``timeout_s`` keeps the results stored under the old one; it
applies to the cells that run next (``--rerun-failed`` reruns the ones that timed out).

``xla_optimisation`` (:data:`ppl_bnn.engine.xla.XLA_OPTIMISATION`) sets how hard XLA optimises the
programs of the cells of every backend whose programs it compiles (NumPyro's): ``"low"`` suits
suites of small networks, whose fits spend most of their time compiling. Each such cell runs on a
worker started with it, and it joins the cell's config (it may change the last bits of what a
fit computes). Left out, the cells keep the flags of the process that runs the sweep (XLA's
defaults, unless ``$XLA_FLAGS`` gives others); so do the reference jobs whatever the suite says:
how many chains a reference draws within its time limit is not traded for compile time.

A dataset's ``model`` may give the network layer by layer instead of the MLP shorthand:
``layers = [{ kind = "conv2d", out_channels = 6, kernel_size = 5, padding = "same",
activation = "relu" }, { kind = "max_pool2d", size = 2 }, { kind = "flatten" },
{ kind = "dense", units = 10 }]`` (the layers' own dict form); the ``[model]`` shorthand then
does not apply to it. Convolutions and pooling take images: set ``image = true``. The same
dataset may be listed more than once with distinct ``variant`` names; the variant joins the cell
ids (``mnist-lenet5-split0-svi-numpyro-seed0``) and the report's dataset label (``mnist/lenet5``).

Everything is checked when the file is read, before any cell runs: the name (it names the
results folder, so it must be a plain file name), finite positive timeouts, the model (built
with :meth:`ppl_bnn.model.spec.BNNSpec.mlp`, or on the image shape for ``layers``), split
indices (against the dataset's split count; for sets in the data directory, when the cells are
listed), data limits, distinct seeds, backends, splits and datasets, ``exclude`` and ``options``
keys, and every method option (by the method's own options class).

A dataset with ``sweep`` is a study, not a contest: it runs only the sweep's method, once per
value of the swept option (which overrides that option wherever else it is set), at the suite's
first seed, on every backend its ``exclude`` (``"method.backend"`` keys) leaves; its ``options``
may set the method's other options. The option's name and value join the cell ids
(``sine-beta-split0-svi-numpyro-seed0-kl_weight0.1``), and the report shows these cells in a
section of their own, never in the Summary, rankings or tables of the contestants.

A method with a ``tune`` table runs twice: as given, and as the tuned contestant
``<method> (tuned)``, whose settings are chosen per cell from the grid on a validation split
carved from its training set (never the test set; see :mod:`ppl_bnn.bench.tuning`). Grid keys
are options of the method or the model settings ``noise`` (a known noise std, standardised
units; regression sets only) and ``prior_scale``; each is a list of distinct finite numbers,
with at most 64 combinations in all. A dataset may change the grid (``options = { map = {
tune = { grid = {...} } } }``, key by key over the method's table) or drop the tuned
contestant (``exclude = ["map.tuned"]``) or the untuned one (``exclude = ["swag.untuned"]``,
for a method with no setting worth showing untuned); a study (``sweep``) is never tuned. ``-tuned``
follows the method in the cell ids (``diabetes-split0-map-tuned-numpyro-seed0``).

A dataset with ``path`` is a data file (:mod:`ppl_bnn.data.files`: CSV, TSV, Parquet or NPZ with
arrays ``x`` and ``y``), its ``name`` a label of your choosing (not a catalogue set's). ``target``
names its target column; ``features`` (default: every other column), ``task``
(``"regression"`` or ``"classification"``; default: from the target's type) and ``classes`` (the
labels in class-index order; default: the labels present, sorted) may be given. Its
test set is ``test_path`` (the one split 0), or a seeded random ``test_fraction`` of its rows
(stratified by class) in each of ``splits = K`` splits (default 1). The file is read and checked
when the suite is read: an error names the file, column and row. Its SHA-256 (and the test
file's) joins every cell's config, so a changed file reruns its cells instead of mixing results;
the rows of each split are written to ``<results>/data/<name>.json``.

With a ``[reference]`` table, every (dataset, split) also gets a reference job
(:meth:`Suite.references`): NumPyro NUTS with these settings on the model the cells fit there
(data limits included), keeping 1,000 draws of the test predictive; a dataset with
``no_reference`` gets none, and the reason is reported instead.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ppl_bnn.bench.cell import Cell, contestant_label, merge_model, weight_prior
from ppl_bnn.bench.data_files import DataFile
from ppl_bnn.bench.perf_suite import PerfSuite, parse_perf_suite
from ppl_bnn.bench.schema import (
    SuiteError,
    check_indices,
    check_keys,
    check_list,
    check_model,
    check_name,
    check_options,
    check_selection,
    check_timeout,
)
from ppl_bnn.bench.suite_datasets import (
    IMAGE_SHAPES,
    OFFLINE_SPLITS,
    DatasetEntry,
    check_splits,
    parse_dataset,
)
from ppl_bnn.bench.suite_sections import parse_margins, parse_methods, parse_reference
from ppl_bnn.bench.sweeps import Sweep
from ppl_bnn.bench.tuning import (
    check_tuned_cell,
)
from ppl_bnn.data import DatasetNotFoundError, num_splits
from ppl_bnn.engine.registry import backend_names, declaration
from ppl_bnn.engine.xla import check_xla_optimisation
from ppl_bnn.methods import get_method
from ppl_bnn.model.priors import HierarchicalPrior
from ppl_bnn.reference import REFERENCE_BACKEND, ReferenceSettings
from ppl_bnn.reference import STORED_DRAWS as REFERENCE_STORED_DRAWS
from ppl_bnn.report.equivalence import Margins

__all__ = [
    "SUITES_DIR",
    "DatasetEntry",
    "ReferenceJob",
    "Suite",
    "SuiteError",
    "Sweep",
    "load_suite",
    "parse_suite",
]

#: The value of ``seeds`` that asks for more seeds where the verdict needs them
#: (:mod:`ppl_bnn.bench.auto_seeds`).
AUTO = "auto"
#: The seeds every cell runs first.
AUTO_SEEDS: tuple[int, ...] = (0, 1, 2)
#: The most seeds a contestant gets: at the spread of the default suite's fidelity (log-ratios
#: with standard deviation about 0.2) two equal contestants are shown as good 9 times in 10 at
#: ten seeds (``tests/report/test_equivalence.py``).
AUTO_CAP = 10

SUITES_DIR = Path(__file__).resolve().parents[2] / "benchmarks"
_SUITE_KEYS = {
    "name", "description", "seeds", "backends", "timeout_s", "reference", "margins", "model",
    "datasets", "methods", "xla_optimisation",
}  # fmt: skip


@dataclass(frozen=True)
class ReferenceJob:
    """The reference posterior of one (dataset, split): the cell that samples it with
    ``settings``, or why there is none (``no_reference``)."""

    cell: Cell
    settings: ReferenceSettings
    no_reference: str | None = None

    @property
    def name(self) -> str:
        """``<dataset>[-<variant>]-split<k>``, its folder under ``<results>/references/``."""
        return f"{self.cell.label.replace('/', '-')}-split{self.cell.split}"


@dataclass(frozen=True)
class Suite:
    """A parsed, checked suite."""

    name: str
    description: str
    seeds: tuple[int, ...]
    backends: tuple[str, ...]
    timeout_s: float
    model: dict[str, Any]
    datasets: tuple[DatasetEntry, ...]
    methods: dict[str, dict[str, Any]]
    reference: ReferenceSettings | None = None
    kind: str = "fit"
    margins: Margins = field(default_factory=Margins)
    auto_seeds: int | None = None
    xla_optimisation: str | None = None

    @property
    def all_seeds(self) -> tuple[int, ...]:
        """Every seed a cell of the suite may run: with ``seeds = "auto"`` those up to its cap
        (:mod:`ppl_bnn.bench.auto_seeds`), else its seeds."""
        return self.seeds if self.auto_seeds is None else tuple(range(self.auto_seeds))

    def cells(
        self,
        *,
        max_splits: int | None = None,
        data_dir: str | Path | None = None,
        only: Mapping[str, set[str]] | None = None,
        seeds: tuple[int, ...] | None = None,
    ) -> list[Cell]:
        """Expand into cells, in a stable order.

        Args:
            max_splits: Run only the first ``max_splits`` splits of each dataset.
            data_dir: Where split counts of ``splits = "all"`` datasets are read from.
            only: Keep cells whose ``dataset`` / ``method`` / ``backend`` are in these sets (a
                ``dataset`` set may name a variant as ``mnist/lenet5``).
            seeds: The seeds instead of the suite's (:attr:`all_seeds`: every cell it may run).

        Raises:
            SuiteError: ``only`` names a value the suite has not (:meth:`selectable`); values
                that all exist but that no cell combines select no cell.
        """
        check_selection(self.name, only, self.selectable())
        out = []
        for entry, split in self._splits(max_splits, data_dir):
            for method in self.methods:
                for backend in self.backends:
                    out.extend(self._cells(entry, split, method, backend, seeds or self.seeds))
        if only:
            out = [c for c in out if all(_selected(c, k, v) for k, v in only.items() if v)]
        return out

    def references(
        self,
        *,
        max_splits: int | None = None,
        data_dir: str | Path | None = None,
        only: Mapping[str, set[str]] | None = None,
    ) -> list[ReferenceJob]:
        """One reference job per (dataset, split), in the order of :meth:`cells`; none when the
        suite has no ``[reference]`` table.

        Args:
            max_splits, data_dir: As for :meth:`cells`.
            only: As for :meth:`cells`; only its ``dataset`` set applies, since a reference
                serves every method and backend.
        """
        datasets = (only or {}).get("dataset")
        check_selection(self.name, {"dataset": datasets or set()}, self.selectable())
        if self.reference is None:
            return []
        return [
            ReferenceJob(
                self._reference_cell(entry, split, self.reference),
                self.reference,
                entry.no_reference,
            )
            for entry, split in self._splits(max_splits, data_dir)
            if not datasets or entry.name in datasets or entry.label in datasets
        ]

    def selectable(self) -> dict[str, set[Any]]:
        """What ``only`` may name (see :meth:`cells`): every dataset's name and label, every
        method and tuned contestant (``map (tuned)``), every backend, every seed (a selection
        the library makes, e.g. the throughput probe's first seed; no flag sets it)."""
        return {
            "dataset": {e.name for e in self.datasets} | {e.label for e in self.datasets},
            "method": set(self.methods)
            | {contestant_label(m, True) for e in self.datasets for m in e.tune},
            "backend": set(self.backends),
            "seed": set(self.all_seeds),
        }

    def _splits(
        self, max_splits: int | None, data_dir: str | Path | None
    ) -> Iterator[tuple[DatasetEntry, int]]:
        if max_splits is not None and max_splits < 1:
            raise SuiteError(f"max_splits must be >= 1, got {max_splits}")
        for entry in self.datasets:
            if entry.data_file is not None:
                splits = tuple(entry.splits)
            elif entry.splits == "all":
                splits: tuple[int, ...] = tuple(range(num_splits(entry.name, data_dir)))
            else:
                splits = tuple(entry.splits)
                if entry.name not in OFFLINE_SPLITS:
                    self._check_data_splits(entry.name, splits, data_dir)
            for split in splits[:max_splits]:
                yield entry, split

    def _check_data_splits(
        self, dataset: str, splits: tuple[int, ...], data_dir: str | Path | None
    ) -> None:
        """Split indices of a set whose split count is in the data directory; a set whose files
        are missing is left to fail in its cells, which say where to get it."""
        try:
            n = num_splits(dataset, data_dir)
        except DatasetNotFoundError:
            return
        check_splits(f"suite {self.name}", dataset, splits, n)

    def _reference_cell(self, entry: DatasetEntry, split: int, settings: ReferenceSettings) -> Cell:
        how = {k: v for k, v in settings.as_dict().items() if k != "timeout_s"}
        return Cell(
            suite=self.name,
            dataset=entry.name,
            split=split,
            method=settings.engine,
            backend=REFERENCE_BACKEND,
            seed=settings.seed,
            model=merge_model(self.model, entry.model),
            options=settings.engine_options(),
            data=entry.limits(),
            stored_draws=REFERENCE_STORED_DRAWS,
            timeout_s=settings.timeout_s,
            variant=entry.variant,
            reference=how,
        )

    def _cells(
        self, entry: DatasetEntry, split: int, method: str, backend: str, seeds: tuple[int, ...]
    ) -> list[Cell]:
        """The cells of (``entry``, ``split``, ``method``, ``backend``): one per seed (and one
        more per seed for the tuned contestant, where the method is tuned here), or for a sweep
        one per swept value at the suite's first seed (none for another method)."""
        if method in entry.exclude or f"{method}.{backend}" in entry.exclude:
            return []
        sweep = entry.sweep
        if sweep is None:
            cells = self._cell(entry, split, method, backend, seeds)
            if method in entry.tune:
                tuning = entry.tune[method].to_dict()
                tuned = [replace(c, tune=tuning) for c in cells]
                cells = tuned if f"{method}.untuned" in entry.exclude else cells + tuned
            return cells
        if method != sweep.method:
            return []
        return [
            cell
            for value in sweep.values
            for cell in self._cell(
                entry, split, method, backend, self.seeds[:1], (sweep.option, value)
            )
        ]

    def _cell(
        self,
        entry: DatasetEntry,
        split: int,
        method: str,
        backend: str,
        seeds: tuple[int, ...],
        swept: tuple[str, float] | None = None,
    ) -> list[Cell]:
        """One cell per seed, its options merged in order; ``swept`` (an option and its value)
        overrides them all and marks the cells as a sweep's."""
        options: dict[str, Any] = {}
        for layer in (
            self.methods[method],
            self.methods[method].get(backend, {}),
            entry.options.get(method, {}),
            entry.options.get(f"{method}.{backend}", {}),
        ):
            options.update({k: v for k, v in layer.items() if not isinstance(v, dict)})
        if swept is not None:
            options[swept[0]] = swept[1]
        note = options.pop("budget_note", None)
        return [
            Cell(
                suite=self.name,
                dataset=entry.name,
                split=split,
                method=method,
                backend=backend,
                seed=seed,
                model=merge_model(self.model, entry.model),
                options=options,
                data=entry.limits(),
                timeout_s=self.timeout_s if entry.timeout_s is None else entry.timeout_s,
                budget_note=note,
                variant=entry.variant,
                sweep=None if swept is None else swept[0],
                xla_optimisation=self.xla_optimisation if declaration(backend).xla else None,
            )
            for seed in seeds
        ]


def _selected(cell: Cell, key: str, values: set[str]) -> bool:
    """Whether ``cell``'s ``key`` is in ``values``; datasets match by name or label, methods by
    name (tuned or not) or contestant label (``map (tuned)``)."""
    return (
        getattr(cell, key) in values
        or (key == "dataset" and cell.label in values)
        or (key == "method" and cell.contestant in values)
    )


def suite_path(name_or_path: str | Path) -> Path:
    """A suite file: a path, or the name of a suite in ``benchmarks/`` (``default`` etc.)."""
    path = Path(name_or_path)
    if path.suffix == ".toml":
        if not path.is_file():
            raise SuiteError(f"suite file {path} does not exist")
        return path
    candidate = SUITES_DIR / f"{name_or_path}.toml"
    if not candidate.is_file():
        known = sorted(p.stem for p in SUITES_DIR.glob("*.toml"))
        raise SuiteError(f"unknown suite {str(name_or_path)!r}; known: {', '.join(known)}")
    return candidate


def load_suite(name_or_path: str | Path) -> Suite | PerfSuite:
    """Read and validate a suite (by name from ``benchmarks/`` or by path): a :class:`Suite`, or a
    :class:`~ppl_bnn.bench.perf_suite.PerfSuite` for ``kind = "perf"``."""
    path = suite_path(name_or_path)
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise SuiteError(f"{path}: not valid TOML: {err}") from err
    kind = raw.get("kind", "fit")
    if kind == "perf":
        return parse_perf_suite(raw, where=str(path))
    if kind != "fit":
        raise SuiteError(f'{path}: kind must be "fit" or "perf", got {kind!r}')
    return parse_suite(
        {k: v for k, v in raw.items() if k != "kind"}, where=str(path), base_dir=path.parent
    )


def parse_suite(
    raw: Mapping[str, Any],
    *,
    where: str = "suite",
    base_dir: str | Path | None = None,
    data_files: Mapping[str, DataFile] | None = None,
) -> Suite:
    """Validate a suite given as a mapping (the parsed TOML): every value is checked here, before
    any cell runs, so that no worker fails on a value the suite file got wrong. A data file's
    relative ``path`` is read from ``base_dir`` (default: the working directory);
    ``data_files`` are data made in memory (:func:`~ppl_bnn.bench.data_files.arrays_data_file`),
    by the name of the ``[[datasets]]`` table that uses each, which gives no ``path``."""
    check_keys(where, raw, _SUITE_KEYS)
    for key in ("name", "datasets", "methods"):
        if key not in raw:
            raise SuiteError(f"{where}: missing required key {key!r}")
    known = backend_names()
    backends = tuple(check_list(where, raw, "backends", known))
    for backend in backends:
        if backend not in known:
            raise SuiteError(f"{where}: unknown backend {backend!r}; available: {list(known)}")
    auto = raw.get("seeds") == AUTO
    if isinstance(raw.get("seeds"), str) and not auto:
        raise SuiteError(f'{where}: seeds must be a list of seeds or "auto", got {raw["seeds"]!r}')
    seeds = AUTO_SEEDS if auto else tuple(check_indices(where, raw, "seeds", (0,)))
    model = check_model(f"{where} [model]", raw.get("model", {}))
    methods = parse_methods(where, raw["methods"])
    if not isinstance(raw["datasets"], list):
        raise SuiteError(f"{where}: datasets must be a list of [[datasets]] tables")
    datasets: list[DatasetEntry] = []
    for i, table in enumerate(raw["datasets"]):
        loc = f"{where} [[datasets]] #{i + 1}"
        entry = parse_dataset(loc, table, model, methods, Path(base_dir or "."), data_files or {})
        if any(d.label == entry.label for d in datasets):
            what = "" if entry.variant is None else f" with variant {entry.variant!r}"
            raise SuiteError(
                f"{where}: dataset {entry.name!r} is listed twice{what}; give each listing of "
                "a dataset its own variant name"
            )
        datasets.append(entry)
    suite = Suite(
        name=check_name(where, raw["name"]),
        description=str(raw.get("description", "")),
        seeds=seeds,
        backends=backends,
        timeout_s=check_timeout(where, raw),
        model=model,
        datasets=tuple(datasets),
        methods=methods,
        reference=parse_reference(where, raw.get("reference")),
        margins=parse_margins(where, raw.get("margins")),
        auto_seeds=AUTO_CAP if auto else None,
        xla_optimisation=_xla_optimisation(where, raw),
    )
    # Every option name and value must be accepted by its method on every backend it is given
    # for: the suite's backends and any other a [methods.<name>.<backend>] table names.
    named = [b for table in methods.values() for b in table if b in backend_names()]
    for entry in suite.datasets:
        for method in suite.methods:
            for backend in dict.fromkeys([*backends, *named]):
                cells = suite._cells(entry, 0, method, backend, suite.seeds)
                # Cells differ in their seed only, or in a sweep's value (each value is
                # checked), or are tuned (each combination of the grid is checked).
                first = cells[0].seed if cells else None
                for cell in cells if entry.sweep else [c for c in cells if c.seed == first]:
                    what = f"{where}: {cell.label} {cell.contestant} on {cell.backend}"
                    check_options(what, cell.method, cell.backend, cell.options)
                    _check_prior(what, cell)
                    if cell.tune is not None:
                        # The sets that are not regression sets are the image sets.
                        regression = (
                            entry.data_file.task == "regression"
                            if entry.data_file is not None
                            else entry.name not in IMAGE_SHAPES
                        )
                        check_tuned_cell(what, cell, regression=regression)
    return suite


def _xla_optimisation(where: str, raw: Mapping[str, Any]) -> str | None:
    """The suite's ``xla_optimisation``, one of :data:`ppl_bnn.engine.xla.XLA_OPTIMISATION`, or
    None where it gives none."""
    level = raw.get("xla_optimisation")
    if level is None:
        return None
    try:
        return check_xla_optimisation(level)
    except ValueError as err:
        raise SuiteError(f"{where}: {err}") from None


def _check_prior(where: str, cell: Cell) -> None:
    """``SuiteError`` where the cell's method cannot fit its prior, as :func:`ppl_bnn.fit` would
    refuse it in the worker: a learned prior, or a hierarchical one for a method built on a
    mode."""
    table = cell.model.get("prior")
    if table is None:
        return
    priors = weight_prior(table)
    priors = priors if isinstance(priors, list) else [priors]
    entry = get_method(cell.method, cell.backend)
    if any(p.learned for p in priors) and not entry.learns_hyperparameters:
        raise SuiteError(
            f"{where}: the prior is learned (learned = true), which {cell.method} cannot fit "
            f"(it samples or approximates a fixed prior); exclude {cell.method!r} for this "
            "dataset or give the prior learned = false"
        )
    if any(isinstance(p, HierarchicalPrior) for p in priors) and entry.needs_mode:
        raise SuiteError(
            f"{where}: the prior is hierarchical (it has latent scales), so its log joint has "
            f"no mode, which {cell.method} is built on; exclude {cell.method!r} for this dataset"
        )
