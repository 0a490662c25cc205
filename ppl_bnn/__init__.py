"""ppl_bnn: one Bayesian neural network spec, Pyro and NumPyro backends, every method.

>>> from ppl_bnn import BNN, fit
>>> model = BNN(x, y, hidden=(50,), noise=0.1)  # doctest: +SKIP
>>> result = fit(model, method="nuts", backend="pyro")  # doctest: +SKIP
>>> comparison = compare(model)  # every method, a verdict  # doctest: +SKIP

The names below are imported when first used (PEP 562), so that the command line's help and
a script's first line do not wait for JAX and torch.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ppl_bnn import layers, priors
    from ppl_bnn.compare import compare
    from ppl_bnn.comparison import Comparison
    from ppl_bnn.fit import fit
    from ppl_bnn.methods import available as available_methods
    from ppl_bnn.model.bnn import BNN
    from ppl_bnn.model.layers import ACTIVATIONS
    from ppl_bnn.model.spec import LIKELIHOODS, BNNSpec
    from ppl_bnn.predictive import Prediction
    from ppl_bnn.results import FitResult
    from ppl_bnn.runtime import configure_runtime

#: Public name -> (module, name in it); a module's own name for a submodule.
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "ACTIVATIONS": ("ppl_bnn.model.layers", "ACTIVATIONS"),
    "BNN": ("ppl_bnn.model.bnn", "BNN"),
    "LIKELIHOODS": ("ppl_bnn.model.spec", "LIKELIHOODS"),
    "BNNSpec": ("ppl_bnn.model.spec", "BNNSpec"),
    "Comparison": ("ppl_bnn.comparison", "Comparison"),
    "FitResult": ("ppl_bnn.results", "FitResult"),
    "Prediction": ("ppl_bnn.predictive", "Prediction"),
    "available_methods": ("ppl_bnn.methods", "available"),
    "compare": ("ppl_bnn.compare", "compare"),
    "configure_runtime": ("ppl_bnn.runtime", "configure_runtime"),
    "fit": ("ppl_bnn.fit", "fit"),
    "layers": ("ppl_bnn.layers", None),
    "priors": ("ppl_bnn.priors", None),
}

__all__ = [
    "ACTIVATIONS",
    "BNN",
    "LIKELIHOODS",
    "BNNSpec",
    "Comparison",
    "FitResult",
    "Prediction",
    "available_methods",
    "compare",
    "configure_runtime",
    "fit",
    "layers",
    "priors",
]


class _Package(types.ModuleType):
    """The package, whose ``fit`` and ``compare`` stay the functions when their modules (of the
    same names) are imported: Python binds a submodule to its parent's attribute on import."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType) and _EXPORTS[name][1]:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ppl_bnn' has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    loaded = importlib.import_module(module)
    value = loaded if attribute is None else getattr(loaded, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
