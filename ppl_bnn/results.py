"""``FitResult``: draws, diagnostics and timings of one fit; storage, ArviZ, save/load."""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ppl_bnn.files import cause_first, import_arviz, write_dir_atomic
from ppl_bnn.methods import get_method
from ppl_bnn.methods.base import Family, Method
from ppl_bnn.model.checks import check_inputs
from ppl_bnn.model.scalars import is_number
from ppl_bnn.model.spec import BNNSpec
from ppl_bnn.predictive import Prediction, check_linearised_at, predictive_at
from ppl_bnn.seeding import check_seed
from ppl_bnn.units import Units

SCHEMA_VERSION = 1
_IDATA_FILE = "inference_data.nc"
_VARIATIONAL_FILE = "variational.nc"
_LINEARISED_FILE = "linearised.nc"
META_FILE = "fit.json"
_FILES = (_IDATA_FILE, _VARIATIONAL_FILE, _LINEARISED_FILE, META_FILE)
#: Keys every ``fit.json`` holds (``save_id`` and ``non_finite`` only from this version on;
#: ``has_linearised`` only from the version that added the linearised predictive, absent meaning
#: none).
_META_KEYS = (
    "spec",
    "method",
    "backend",
    "seed",
    "options",
    "timings",
    "info",
    "versions",
    "losses",
    "has_variational",
)


@dataclass
class FitResult:
    """Everything one ``fit`` produced: the fields below, :meth:`predict` at new inputs, and
    :meth:`save` / :meth:`load`."""

    #: The model spec (the training data is not kept, only ``observed``).
    spec: BNNSpec
    #: The method that ran.
    method: str
    #: The backend it ran on.
    backend: str
    #: The seed it ran with.
    seed: int
    #: The method's options, with defaults filled in.
    options: dict[str, Any]
    #: Site -> numpy array (chain, draw, ``*site_shape``).
    draws: dict[str, np.ndarray]
    #: Pointwise training log-likelihood (chain, draw, N).
    log_likelihood: np.ndarray
    #: Training targets (N,).
    observed: np.ndarray
    #: Seconds spent in ``compile``, ``warmup`` (MCMC warmup / SVI optimisation),
    #: ``sampling``, ``log_likelihood`` and ``total``.
    timings: dict[str, float]
    #: Sampler statistics (chain, draw), such as ``diverging``, ``n_steps``, ``tree_depth``
    #: (NUTS), ``step_size``, ``acceptance_rate``, ``lp`` and ``energy`` (NumPyro).
    sample_stats: dict[str, np.ndarray] = field(default_factory=dict)
    #: Loss (negative ELBO estimate) per optimisation step; (members, steps) for ensembles.
    losses: np.ndarray | None = None
    #: SVI guide parameters ``{"loc": {...}, "scale": {...}}`` (unconstrained).
    variational: dict[str, dict[str, np.ndarray]] | None = None
    #: Execution details (``device``, chain method, Pyro potential ``pyro_mode`` or ELBO,
    #: threads, and ``diverged``); where a method kept finite draws from a breakdown, also
    #: ``diverged_at_step`` (per chain or member), ``diverged_sites`` and ``diverged_cause``
    #: (see :mod:`ppl_bnn.methods.divergence`).
    info: dict[str, Any] = field(default_factory=dict)
    #: Library versions.
    versions: dict[str, str] = field(default_factory=dict)
    #: The mode (weight site -> one draw's value) that the linearised (GLM) predictive expands
    #: the network around (:mod:`ppl_bnn.predictive`), used by :meth:`predict` and in
    #: ``log_likelihood``; None for the predictive over draws.
    linearised_at: dict[str, np.ndarray] | None = None
    #: The units of the data the fit was made from, where it was fitted to standardised data
    #: (a suite's or ``compare``'s cell): :meth:`predict` then takes and returns them. None:
    #: the fit's own units are the data's (a fit of a ``BNN`` of the data as given).
    units: Units | None = None

    @property
    def num_chains(self) -> int:
        """Chains in the result (an ensemble's members are draws of one chain)."""
        return int(self.log_likelihood.shape[0])

    @property
    def num_draws(self) -> int:
        """Draws per chain."""
        return int(self.log_likelihood.shape[1])

    def __repr__(self) -> str:
        return (
            f"FitResult(method={self.method!r}, backend={self.backend!r}, seed={self.seed}, "
            f"chains={self.num_chains}, draws={self.num_draws}, "
            f"total={self.timings.get('total', float('nan')):.2f}s)"
        )

    def predict(self, x: object) -> Prediction:
        """Posterior predictive at inputs ``x`` (N, D) or images (N, H, W, C), as the model was
        built for, vectorised over all draws (with the network linearised around
        ``linearised_at`` where the result has one). Where the fit has :attr:`units`, ``x`` is
        in the data's own units and so is the predictive (:mod:`ppl_bnn.units`)."""
        x_arr = check_inputs(x, self.spec.input_shape)
        if self.units is not None:
            x_arr = self.units.inputs(np.asarray(x, dtype=np.float64)).astype(np.float32)
        pred = predictive_at(
            self.backend, self.spec, self.draws, x_arr, linearised_at=self.linearised_at
        )
        return pred if self.units is None else self.units.prediction(pred)

    def attrs(self) -> dict[str, Any]:
        """Flat, netCDF-friendly metadata: method, backend, seed, timings, versions, options."""
        out: dict[str, Any] = {
            "method": self.method,
            "backend": self.backend,
            "seed": self.seed,
            "options": json.dumps(self.options, sort_keys=True),
            "info": json.dumps(self.info, sort_keys=True),
        }
        out.update({f"timing_{k}_s": float(v) for k, v in self.timings.items()})
        out.update({f"version_{k}": v for k, v in self.versions.items()})
        return out

    def to_arviz(self) -> Any:
        """``arviz.InferenceData`` with posterior, sample_stats (samplers), log_likelihood and
        observed_data groups; dims ``layer{l}_in`` / ``layer{l}_out`` / ``obs``. :meth:`attrs`
        is set on the InferenceData and on its posterior group."""
        az = import_arviz()
        dims = {**self.spec.site_dims(), "y": ["obs"]}
        attrs = self.attrs()
        return az.from_dict(
            posterior=self.draws,
            sample_stats=self.sample_stats or None,
            log_likelihood={"y": self.log_likelihood},
            observed_data={"y": self.observed},
            dims=dims,
            attrs=attrs,
            posterior_attrs=attrs,
        )

    def save(self, path: str | os.PathLike) -> Path:
        """Write the result to folder ``path``: ArviZ netCDF, guide netCDF, the mode of a
        linearised predictive (``linearised.nc``) and JSON metadata.

        Everything is written into a staging folder beside ``path``, which then takes its place
        in one step (:func:`~ppl_bnn.files.write_dir_atomic`): a save killed at any moment
        leaves ``path`` holding the complete earlier result, or the complete new one. An
        existing ``path`` is replaced only if it holds nothing but a saved fit's files.
        ``fit.json`` is strict JSON: a non-finite number is written as ``null`` and its place
        listed under ``non_finite``. A write that fails for a system error (a full disk) raises
        an ``OSError`` of that errno whose message leads with it (``No space left on device``),
        not with HDF5's words for it (:func:`~ppl_bnn.files.cause_first`).
        """
        out = Path(path)
        _check_replaceable(out)
        return write_dir_atomic(out, lambda folder: self.write_into(folder, shown_as=out))

    def write_into(self, folder: str | os.PathLike, *, shown_as: Path | None = None) -> list[str]:
        """Write :meth:`save`'s files into the existing ``folder`` as they are, beside what it
        holds (a benchmark cell's folder, itself staged until complete), so that :meth:`load`
        reads the folder back. Returns the names written. ``shown_as``: the folder :meth:`save`
        replaces, which errors name (and say is left as it was)."""
        out = Path(folder)
        kept = "" if shown_as is None else f"; {shown_as} is left as it was"
        shown = out if shown_as is None else shown_as
        save_id = uuid.uuid4().hex
        idata = self.to_arviz()
        idata.posterior.attrs["save_id"] = save_id
        meta = {
            "schema_version": SCHEMA_VERSION,
            "save_id": save_id,
            "spec": self.spec.to_dict(),
            "method": self.method,
            "backend": self.backend,
            "seed": self.seed,
            "options": self.options,
            "timings": self.timings,
            "info": self.info,
            "versions": self.versions,
            "losses": self.losses,
            "has_variational": self.variational is not None,
            "has_linearised": self.linearised_at is not None,
            "units": None if self.units is None else self.units.to_dict(),
        }
        non_finite: list[list[str | int]] = []
        meta = _null_non_finite(meta, [], non_finite)
        meta["non_finite"] = non_finite
        text = json.dumps(meta, indent=2, sort_keys=True, allow_nan=False)

        netcdf: dict[str, Any] = {_IDATA_FILE: idata}
        if self.variational is not None:
            variational = _variational_dataset(self.variational)
            netcdf[_VARIATIONAL_FILE] = variational.assign_attrs(save_id=save_id)
        if self.linearised_at is not None:
            linearised = _linearised_dataset(self.spec, self.linearised_at)
            netcdf[_LINEARISED_FILE] = linearised.assign_attrs(save_id=save_id)
        for name, data in netcdf.items():
            # A full disk: "No space left on device" first, not HDF5's own words for it.
            failed = f"cannot save the fit to {shown} (writing {name}){kept}"
            with cause_first(failed):
                if name == _IDATA_FILE:
                    # Draws hardly compress: zlib made a cell's file 5% smaller and its write
                    # 2.4 times as long (0.17 s against 0.07 s for 4 MB of draws).
                    data.to_netcdf(str(out / name), engine="h5netcdf", compress=False)
                else:
                    data.to_netcdf(str(out / name), engine="h5netcdf")
        (out / META_FILE).write_text(text)
        return [*netcdf, META_FILE]

    @classmethod
    def load(cls, path: str | os.PathLike) -> FitResult:
        """Read a result written by :meth:`save`, checked whole.

        Raises:
            FileNotFoundError: There is no ``fit.json`` at ``path``.
            ResultFileError: A file is missing, truncated or corrupt, a key is missing, or the
                files disagree (the spec with the draws' sites and shapes, the method and save
                with the draws); the message names the file and what is wrong.
        """
        src = Path(path)
        meta_path = src / META_FILE
        if not meta_path.is_file():
            raise FileNotFoundError(f"no saved fit at {src}: {meta_path} is missing")
        meta = _read_meta(meta_path)
        try:
            spec = BNNSpec.from_dict(meta["spec"])
        except (TypeError, ValueError, KeyError) as err:
            raise ResultFileError(f"{meta_path}: the spec cannot be read: {err}") from err
        method = _check_method(meta, meta_path)
        groups = _read_idata(src / _IDATA_FILE)
        _check_same_save(meta, groups["posterior"].attrs, src / _IDATA_FILE)
        draws, stats, ll, observed = _check_draws(spec, method, groups, src / _IDATA_FILE)
        variational = None
        if meta["has_variational"]:
            variational = _read_variational(src / _VARIATIONAL_FILE, spec, meta)
        linearised_at = None
        if meta.get("has_linearised", False):
            linearised_at = _read_linearised(src / _LINEARISED_FILE, spec, meta)
        units = None
        if meta.get("units") is not None:
            try:
                units = Units.from_dict(meta["units"])
            except (TypeError, ValueError, KeyError) as err:
                raise ResultFileError(f"{meta_path}: 'units' cannot be read: {err}") from err
        losses = meta["losses"]
        try:
            losses = None if losses is None else np.asarray(losses, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ResultFileError(f"{meta_path}: 'losses' is not an array of numbers") from err
        return cls(
            spec=spec,
            method=meta["method"],
            backend=meta["backend"],
            seed=meta["seed"],
            options=meta["options"],
            draws=draws,
            log_likelihood=ll,
            observed=observed,
            timings=meta["timings"],
            sample_stats=stats,
            losses=losses,
            variational=variational,
            info=meta["info"],
            versions=meta["versions"],
            linearised_at=linearised_at,
            units=units,
        )


class ResultFileError(ValueError):
    """A saved result that cannot be read as one whole fit; the message names the file and what
    is wrong with it."""


def _check_replaceable(out: Path) -> None:
    """``FileExistsError`` unless ``out`` is absent, empty or holds only a saved fit's files (a
    save replaces the whole folder, and must not take anything else with it)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise FileExistsError(f"cannot save a fit to {out}: it exists and is not a folder")
    others = sorted(
        entry.name
        for entry in out.iterdir()
        if entry.name not in _FILES
        and not any(entry.name.startswith(f".{name}.") for name in _FILES)
    )
    if others:
        raise FileExistsError(
            f"cannot save a fit to {out}: it holds {', '.join(others[:5])}, which are no saved "
            "fit's files and would be replaced with the folder; choose another folder"
        )


def _null_non_finite(value: Any, path: list[str | int], found: list[list[str | int]]) -> Any:
    """``value`` as strict JSON: every non-finite number becomes ``None`` and its path (keys and
    list indices) goes into ``found``; a numeric list is listed once, by its own path."""
    if isinstance(value, Mapping):
        return {k: _null_non_finite(v, [*path, k], found) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list | tuple):
        inner: list[list[str | int]] = []
        out = [_null_non_finite(v, [*path, i], inner) for i, v in enumerate(value)]
        numeric = all(is_number(v) for v in value)
        found.extend([path] if inner and numeric else inner)
        return out
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        found.append(path)
        return None
    return value


def _nan_for_null(value: Any) -> Any:
    if value is None:
        return float("nan")
    if isinstance(value, list):
        return [_nan_for_null(v) for v in value]
    return value


def _read_meta(meta_path: Path) -> dict[str, Any]:
    """``fit.json``, every key checked present, its nulls listed under ``non_finite`` as NaN."""
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ResultFileError(
            f"{meta_path} is not valid JSON (truncated or corrupt?): {err}"
        ) from err
    if not isinstance(meta, dict):
        raise ResultFileError(f"{meta_path} holds no JSON object")
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise ResultFileError(
            f"{meta_path} has schema version {meta.get('schema_version')!r}, "
            f"this version of ppl_bnn reads {SCHEMA_VERSION}"
        )
    missing = [key for key in _META_KEYS if key not in meta]
    if missing:
        raise ResultFileError(f"{meta_path} lacks the key(s) {', '.join(map(repr, missing))}")
    try:
        check_seed(meta["seed"])
    except ValueError as err:
        raise ResultFileError(f"{meta_path}: bad 'seed': {err}") from err
    for place in meta.get("non_finite", []):
        try:
            *parents, last = place
            holder = meta
            for key in parents:
                holder = holder[key]
            holder[last] = _nan_for_null(holder[last])
        except (KeyError, IndexError, TypeError, ValueError) as err:
            raise ResultFileError(
                f"{meta_path}: non_finite lists {place!r}, which is not in the file"
            ) from err
    return meta


def _check_method(meta: dict[str, Any], meta_path: Path) -> Method:
    """The method ``fit.json`` names, which must run on the backend it names."""
    try:
        return get_method(meta["method"], meta["backend"])
    except ValueError as err:
        raise ResultFileError(f"{meta_path}: {err}") from err


def _read_idata(path: Path) -> dict[str, Any]:
    """The groups of ``inference_data.nc``, read whole (a truncated file fails here)."""
    az = import_arviz()
    if not path.is_file():
        raise ResultFileError(f"{path} is missing: the saved fit is incomplete")
    try:
        with az.rc_context({"data.load": "eager"}):
            idata = az.from_netcdf(path, engine="h5netcdf")
    except Exception as err:  # h5py and xarray raise many types for a damaged file
        raise ResultFileError(f"{path} cannot be read (truncated or corrupt?): {err}") from err
    groups = {name: idata[name] for name in idata.groups()}
    for name in ("posterior", "log_likelihood", "observed_data"):
        if name not in groups:
            raise ResultFileError(f"{path} has no {name} group")
    return groups


def _check_same_save(meta: dict[str, Any], attrs: Mapping[str, Any], path: Path) -> None:
    """``ResultFileError`` unless the netCDF file at ``path`` was saved with this ``fit.json``:
    the save id (written by each save into every file) and what ran, where both record them.
    Files of one save that disagree on what ran mean ``fit.json`` was changed after it."""
    same_save = meta.get("save_id") is not None and attrs.get("save_id") == meta["save_id"]
    for key in ("save_id", "method", "backend", "seed"):
        if meta.get(key) is None or key not in attrs:  # written before save_id existed
            continue
        stored = attrs[key].item() if isinstance(attrs[key], np.generic) else attrs[key]
        if stored != meta[key] and same_save:
            raise ResultFileError(
                f"{path.with_name(META_FILE)}: {key!r} is {meta[key]!r}, but {path}, written by "
                f"the same save, says {stored!r}: fit.json was changed after the save"
            )
        if stored != meta[key]:
            raise ResultFileError(
                f"{path} holds the draws of another save ({key} {stored!r}, but "
                f"fit.json says {meta[key]!r}): the folder mixes two fits"
            )


def _check_draws(
    spec: BNNSpec, method: Method, groups: dict[str, Any], path: Path
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Draws, sample stats, log-likelihood and observed targets, checked against the spec (the
    sites and their shapes) and the method (sampler statistics for Markov chains only)."""
    posterior = groups["posterior"]
    sites = {s.name: s.shape for s in spec.sites()}
    stored = set(map(str, posterior.data_vars))
    if stored != set(sites):
        raise ResultFileError(
            f"{path} holds the sites {sorted(stored)}, but the spec in fit.json has "
            f"{sorted(sites)}: the files disagree"
        )
    draws = {name: posterior[name].values.copy() for name in sites}
    lead = draws[next(iter(sites))].shape[:2]
    for name, shape in sites.items():
        if draws[name].shape != (*lead, *shape):
            raise ResultFileError(
                f"{path}: site {name!r} has draws of shape {draws[name].shape}, but the spec in "
                f"fit.json gives it the shape {shape} (draws {(*lead, *shape)})"
            )
    observed = groups["observed_data"]["y"].values.copy()
    ll = groups["log_likelihood"]["y"].values.copy()
    if ll.shape != (*lead, observed.shape[0]):
        raise ResultFileError(
            f"{path}: the log-likelihood has shape {ll.shape}, expected {(*lead, observed.size)}"
        )
    stats = {}
    if "sample_stats" in groups:
        stats = {str(k): v.values.copy() for k, v in groups["sample_stats"].data_vars.items()}
    chain = method.family == Family.MARKOV_CHAIN
    if chain != bool(stats) or any(v.shape != lead for v in stats.values()):
        raise ResultFileError(
            f"{path}: sampler statistics {sorted(stats)} do not fit method {method.name!r} "
            f"with draws {lead}"
        )
    return draws, stats, ll, observed


def _variational_dataset(variational: Mapping[str, Mapping[str, np.ndarray]]) -> Any:
    import xarray as xr

    data = {}
    for kind, sites in variational.items():
        for name, arr in sites.items():
            data[f"{kind}__{name}"] = ([f"{name}_dim_{i}" for i in range(arr.ndim)], arr)
    return xr.Dataset(data)


def _read_variational(
    path: Path, spec: BNNSpec, meta: dict[str, Any]
) -> dict[str, dict[str, np.ndarray]]:
    import xarray as xr

    if not path.is_file():
        raise ResultFileError(f"{path} is missing, but fit.json says the fit has a guide")
    out: dict[str, dict[str, np.ndarray]] = {}
    try:
        with xr.open_dataset(path, engine="h5netcdf") as dataset:
            attrs = dict(dataset.attrs)
            for key, var in dataset.data_vars.items():
                kind, name = str(key).split("__", 1)
                out.setdefault(kind, {})[name] = var.values.copy()
    except Exception as err:  # h5py and xarray raise many types for a damaged file
        raise ResultFileError(f"{path} cannot be read (truncated or corrupt?): {err}") from err
    _check_same_save(meta, attrs, path)
    sites = {s.name: s.shape for s in spec.sites()}
    for kind, params in out.items():
        for name, arr in params.items():
            if sites.get(name) != arr.shape:
                raise ResultFileError(
                    f"{path}: guide {kind} {name!r} has shape {arr.shape}, but the spec in "
                    f"fit.json has {sites.get(name, 'no such site')}"
                )
    return out


def _linearised_dataset(spec: BNNSpec, mode: Mapping[str, np.ndarray]) -> Any:
    """The mode of a linearised predictive, one variable per weight site (the spec's dims)."""
    import xarray as xr

    dims = spec.site_dims()
    return xr.Dataset({name: (dims[name], np.asarray(value)) for name, value in mode.items()})


def _read_linearised(path: Path, spec: BNNSpec, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    """The mode in ``linearised.nc``, checked against the spec (:func:`check_linearised_at`)."""
    import xarray as xr

    if not path.is_file():
        raise ResultFileError(
            f"{path} is missing, but fit.json says the fit has a linearised predictive"
        )
    try:
        with xr.open_dataset(path, engine="h5netcdf") as dataset:
            attrs = dict(dataset.attrs)
            mode = {str(k): v.values.copy() for k, v in dataset.data_vars.items()}
    except Exception as err:  # h5py and xarray raise many types for a damaged file
        raise ResultFileError(f"{path} cannot be read (truncated or corrupt?): {err}") from err
    _check_same_save(meta, attrs, path)
    try:
        return check_linearised_at(spec, mode)
    except ValueError as err:
        raise ResultFileError(f"{path}: {err}") from err
