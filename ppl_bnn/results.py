"""``FitResult``: draws, diagnostics and timings of one fit; storage, ArviZ, save/load."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ppl_bnn.files import import_arviz, write_atomic
from ppl_bnn.model.spec import BNNSpec
from ppl_bnn.model.validate import validate_inputs
from ppl_bnn.predictive import Prediction, predictive_at

SCHEMA_VERSION = 1
_IDATA_FILE = "inference_data.nc"
_VARIATIONAL_FILE = "variational.nc"
_META_FILE = "fit.json"


@dataclass
class FitResult:
    """Everything one ``fit`` produced.

    Attributes:
        spec: The model spec (the training data is not kept, only ``observed``).
        method, backend, seed, options: What ran, echoed back (options with defaults filled in).
        draws: Site -> numpy array (chain, draw, *site_shape).
        log_likelihood: Pointwise training log-likelihood (chain, draw, N).
        observed: Training targets (N,).
        timings: Seconds: ``compile``, ``warmup`` (MCMC warmup / SVI optimisation), ``sampling``,
            ``log_likelihood`` and ``total``.
        sample_stats: Sampler statistics (chain, draw): ``diverging``, ``n_steps``,
            ``tree_depth`` (NUTS), ``step_size``, ``acceptance_rate``, ``lp``, ``energy`` (NumPyro).
        losses: Loss (negative ELBO estimate) per optimisation step; (members, steps) for
            ensembles.
        variational: SVI guide parameters ``{"loc": {...}, "scale": {...}}`` (unconstrained).
        info: Execution details: chain method, Pyro potential (``pyro_mode``) or ELBO, threads,
            ``diverged_at_step`` when an SVI loss became non-finite.
        versions: Library versions.
    """

    spec: BNNSpec
    method: str
    backend: str
    seed: int
    options: dict[str, Any]
    draws: dict[str, np.ndarray]
    log_likelihood: np.ndarray
    observed: np.ndarray
    timings: dict[str, float]
    sample_stats: dict[str, np.ndarray] = field(default_factory=dict)
    losses: np.ndarray | None = None
    variational: dict[str, dict[str, np.ndarray]] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def num_chains(self) -> int:
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
        """Posterior predictive at inputs ``x`` (N, D), vectorised over all draws."""
        x_arr = validate_inputs(x, self.spec.input_dim)
        return predictive_at(self.backend, self.spec, self.draws, x_arr)

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
        """Write the result to directory ``path``: ArviZ netCDF, guide netCDF and JSON metadata."""
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        idata = self.to_arviz()
        write_atomic(out / _IDATA_FILE, lambda tmp: idata.to_netcdf(tmp, engine="h5netcdf"))
        if self.variational is not None:
            dataset = _variational_dataset(self.variational)
            write_atomic(
                out / _VARIATIONAL_FILE, lambda tmp: dataset.to_netcdf(tmp, engine="h5netcdf")
            )
        meta = {
            "schema_version": SCHEMA_VERSION,
            "spec": self.spec.to_dict(),
            "method": self.method,
            "backend": self.backend,
            "seed": self.seed,
            "options": self.options,
            "timings": self.timings,
            "info": self.info,
            "versions": self.versions,
            "losses": None if self.losses is None else np.asarray(self.losses).tolist(),
            "has_variational": self.variational is not None,
        }

        def write_json(tmp: str) -> None:
            Path(tmp).write_text(json.dumps(meta, indent=2, sort_keys=True))

        write_atomic(out / _META_FILE, write_json)
        return out

    @classmethod
    def load(cls, path: str | os.PathLike) -> FitResult:
        """Read a result written by :meth:`save`."""
        az = import_arviz()
        src = Path(path)
        meta_path = src / _META_FILE
        if not meta_path.is_file():
            raise FileNotFoundError(f"no saved fit at {src}: {meta_path} is missing")
        meta = json.loads(meta_path.read_text())
        if meta.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(
                f"{meta_path} has schema version {meta.get('schema_version')!r}, "
                f"this version of ppl_bnn reads {SCHEMA_VERSION}"
            )
        idata = az.from_netcdf(src / _IDATA_FILE, engine="h5netcdf")
        spec = BNNSpec.from_dict(meta["spec"])
        draws = {s.name: idata.posterior[s.name].values.copy() for s in spec.sites()}
        stats = (
            {k: v.values.copy() for k, v in idata.sample_stats.data_vars.items()}
            if "sample_stats" in idata.groups()
            else {}
        )
        variational = None
        if meta["has_variational"]:
            variational = _read_variational(src / _VARIATIONAL_FILE)
        losses = meta["losses"]
        return cls(
            spec=spec,
            method=meta["method"],
            backend=meta["backend"],
            seed=meta["seed"],
            options=meta["options"],
            draws=draws,
            log_likelihood=idata.log_likelihood["y"].values.copy(),
            observed=idata.observed_data["y"].values.copy(),
            timings=meta["timings"],
            sample_stats=stats,
            losses=None if losses is None else np.asarray(losses, dtype=np.float64),
            variational=variational,
            info=meta["info"],
            versions=meta["versions"],
        )


def _variational_dataset(variational: Mapping[str, Mapping[str, np.ndarray]]) -> Any:
    import xarray as xr

    data = {}
    for kind, sites in variational.items():
        for name, arr in sites.items():
            data[f"{kind}__{name}"] = ([f"{name}_dim_{i}" for i in range(arr.ndim)], arr)
    return xr.Dataset(data)


def _read_variational(path: Path) -> dict[str, dict[str, np.ndarray]]:
    import xarray as xr

    out: dict[str, dict[str, np.ndarray]] = {}
    with xr.open_dataset(path, engine="h5netcdf") as dataset:
        for key, var in dataset.data_vars.items():
            kind, name = str(key).split("__", 1)
            out.setdefault(kind, {})[name] = var.values.copy()
    return out
