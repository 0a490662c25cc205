"""A suite's ``[[datasets]]`` entries: each parsed and checked into a :class:`DatasetEntry`
(its data, splits, model override, exclusions and options), with the image sets' shapes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppl_bnn.bench.cell import merge_model
from ppl_bnn.bench.data_files import FILE_KEYS, DataFile, parse_data_file
from ppl_bnn.bench.schema import (
    SuiteError,
    check_indices,
    check_int,
    check_keys,
    check_list,
    check_model,
    check_text,
    check_timeout,
)
from ppl_bnn.bench.sweeps import Sweep, parse_sweep
from ppl_bnn.bench.tuning import (
    CONTESTANTS,
    Tuning,
    dataset_tuning,
)
from ppl_bnn.data import dataset_names, num_splits
from ppl_bnn.data.catalog import BUILTIN, IMAGE_SETS
from ppl_bnn.engine.registry import backend_names

_DATASET_KEYS = {
    "name", "splits", "max_train", "max_test", "model", "exclude", "options", "no_reference",
    "variant", "image", "timeout_s", "sweep", *FILE_KEYS,
}  # fmt: skip
#: One example's shape and the class count of the sets that load as images (``image = true``).
IMAGE_SHAPES: dict[str, tuple[tuple[int, ...], int]] = {
    "digits": ((8, 8, 1), 10),
    "mnist": ((28, 28, 1), 10),
    "fashion-mnist": ((28, 28, 1), 10),
}
#: Layer kinds that take images, not flat rows.
_IMAGE_LAYERS = {"conv2d", "max_pool2d", "avg_pool2d", "flatten"}
#: Sets whose split count is known without a data directory (checked when the suite is read).
OFFLINE_SPLITS = (*BUILTIN, *IMAGE_SETS)


@dataclass(frozen=True)
class DatasetEntry:
    """One dataset of a suite and its overrides (``timeout_s``: its cells' limit in seconds,
    None for the suite's; ``tune``: the grid of each method that also runs tuned here)."""

    name: str
    splits: tuple[int, ...] | str = (0,)
    max_train: int | None = None
    max_test: int | None = None
    model: dict[str, Any] = field(default_factory=dict)
    exclude: tuple[str, ...] = ()
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    no_reference: str | None = None
    variant: str | None = None
    image: bool = False
    timeout_s: float | None = None
    sweep: Sweep | None = None
    tune: dict[str, Tuning] = field(default_factory=dict)
    data_file: DataFile | None = None

    def limits(self) -> dict[str, Any]:
        """The loader keywords given (``max_train``, ``max_test``, ``image`` when true, and a
        data file's ``file``)."""
        limits: dict[str, Any] = {"max_train": self.max_train, "max_test": self.max_test}
        out = {k: v for k, v in limits.items() if v is not None}
        if self.data_file is not None:
            out["file"] = self.data_file.loader_keywords()
        return {**out, "image": True} if self.image else out

    @property
    def label(self) -> str:
        """``name``, or ``name/variant``."""
        return self.name if self.variant is None else f"{self.name}/{self.variant}"


def _method_key(loc: str, key: Any, methods: Mapping[str, Any], tuned: bool = False) -> None:
    """``key`` of a dataset's ``exclude`` or ``options``: ``method`` or ``method.backend``, and
    with ``tuned`` (an ``exclude``) also ``method.tuned`` (the tuned contestant) or
    ``method.untuned`` (the method as given)."""
    if not isinstance(key, str):
        raise SuiteError(f"{loc}: {key!r} is not a method name")
    method, _, backend = key.partition(".")
    if method not in methods:
        raise SuiteError(f"{loc}: {key!r} names no method of this suite ({list(methods)})")
    if backend and backend not in backend_names() and not (tuned and backend in CONTESTANTS):
        more = " or tuned / untuned" if tuned else ""
        raise SuiteError(f"{loc}: {key!r} names no backend ({list(backend_names())}){more}")


def parse_dataset(
    loc: str,
    table: Any,
    model: Mapping[str, Any],
    methods: Mapping[str, Any],
    base_dir: Path,
    data_files: Mapping[str, DataFile],
) -> DatasetEntry:
    """One ``[[datasets]]`` table, its split indices checked against the dataset's splits where
    they are known without a data directory (the rest in :meth:`Suite.cells`); a data file is
    read and checked here, unless it was made in memory (``data_files``)."""
    if not isinstance(table, Mapping):
        raise SuiteError(f"{loc}: must be a table, got {table!r}")
    check_keys(loc, table, _DATASET_KEYS)
    if "name" not in table:
        raise SuiteError(f"{loc}: missing 'name'")
    name = table["name"]
    data_file = data_files.get(name)
    if "path" in table:
        data_file = parse_data_file(loc, table, base_dir)
    if data_file is None and (given := sorted(set(FILE_KEYS) & set(table))):
        raise SuiteError(f'{loc}: {given} describe a data file, which needs path = "..."')
    if data_file is None and name not in dataset_names():
        raise SuiteError(
            f"{loc}: unknown dataset {name!r}; known: {sorted(dataset_names())} (or a data "
            'file of your own: path = "...", target = "...")'
        )
    variant = check_text(loc, table, "variant")
    if variant is not None and not re.fullmatch(r"[a-z0-9][a-z0-9_]*", variant):
        raise SuiteError(
            f"{loc}: variant must be lower-case letters, digits and underscores (it joins the "
            f"cell ids), got {variant!r}"
        )
    image = table.get("image", False)
    override = _dataset_model(loc, table, model, image, _image_shape(name, data_file))
    splits = table.get("splits", [0])
    if data_file is not None:
        splits = list(range(data_file.splits))
    elif splits != "all":
        if not isinstance(splits, list):
            raise SuiteError(f'{loc}: splits must be "all" or a list of non-negative ints')
        splits = check_indices(loc, table, "splits", [0])
        if name in OFFLINE_SPLITS:
            check_splits(loc, name, splits, num_splits(name))
    exclude = check_list(loc, table, "exclude", ())
    options = table.get("options", {})
    if not isinstance(options, Mapping) or not all(
        isinstance(v, Mapping) for v in options.values()
    ):
        raise SuiteError(f"{loc}: options must map method names to tables of options")
    if not all(isinstance(key, str) for key in exclude):
        raise SuiteError(f"{loc}: exclude must be a list of strings, got {exclude!r}")
    for key in exclude:
        _method_key(loc, key, methods, tuned=True)
    for key in options:
        _method_key(loc, key, methods)
    sweep = parse_sweep(f"{loc} sweep", table.get("sweep"), methods, exclude, options)
    tune = dataset_tuning(loc, methods, exclude, options, sweep)
    limits = {
        key: None if table.get(key) is None else check_int(loc, table, key, 0, minimum=1)
        for key in ("max_train", "max_test")
    }
    return DatasetEntry(
        name=name,
        splits="all" if splits == "all" else tuple(splits),
        model=override,
        exclude=tuple(exclude),
        options={k: {o: v for o, v in t.items() if o != "tune"} for k, t in options.items()},
        no_reference=check_text(loc, table, "no_reference"),
        variant=variant,
        image=image,
        timeout_s=None if "timeout_s" not in table else check_timeout(loc, table),
        sweep=sweep,
        tune=tune,
        data_file=data_file,
        **limits,
    )


def _dataset_model(
    loc: str,
    table: Mapping[str, Any],
    model: Mapping[str, Any],
    image: Any,
    shape: tuple[tuple[int, ...], int | None] | None,
) -> dict[str, Any]:
    """A dataset's ``model`` override, checked alone and merged with the suite's ``[model]``
    on the dataset's inputs: images (``image = true``, of one example's ``shape`` and class
    count) or flat rows."""
    if not isinstance(image, bool):
        raise SuiteError(f"{loc}: image must be true or false, got {image!r}")
    if image and shape is None:
        raise SuiteError(
            f"{loc}: image = true needs an image set ({', '.join(IMAGE_SHAPES)}) or images of "
            f"your own, got {table['name']!r}"
        )
    override = check_model(f"{loc} model", table.get("model", {}))
    merged = merge_model(model, override)
    _check_inputs(loc, merged, image)
    check_model(f"{loc} model (with [model])", merged, image=shape if image else None)
    return override


def _image_shape(
    name: str, data_file: DataFile | None
) -> tuple[tuple[int, ...], int | None] | None:
    """One example's shape and the class count (None for regression) where the dataset holds
    images, else None."""
    if data_file is None:
        return IMAGE_SHAPES.get(name)
    if data_file.image_shape is None:
        return None
    return data_file.image_shape, None if data_file.classes is None else len(data_file.classes)


def _check_inputs(loc: str, model: Mapping[str, Any], image: bool) -> None:
    """Images go with ``layers`` (the MLP shorthand takes flat rows), and convolutions, pooling
    and ``flatten`` with images."""
    layers = model.get("layers")
    if image and layers is None:
        raise SuiteError(
            f"{loc}: image = true loads (N, H, W, 1) inputs, which the MLP shorthand (hidden) "
            "does not take; give model = { layers = [...] }"
        )
    kinds = {t.get("kind") for t in layers or [] if isinstance(t, Mapping)}
    if not image and kinds & _IMAGE_LAYERS:
        raise SuiteError(
            f"{loc}: layers {sorted(kinds & _IMAGE_LAYERS)} take images; set image = true"
        )


def check_splits(where: str, dataset: str, splits: Iterable[int], n: int) -> None:
    """``SuiteError`` naming the split indices of ``dataset`` that are not below ``n``."""
    bad = [s for s in splits if s >= n]
    if bad:
        raise SuiteError(
            f"{where}: {dataset} splits {bad} out of range: it has {n} splits (0..{n - 1})"
        )
