"""ppl_bnn: one Bayesian neural network spec, Pyro and NumPyro backends, every method.

>>> from ppl_bnn import BNN, fit
>>> model = BNN(x, y, hidden=(50,), noise=0.1)  # doctest: +SKIP
>>> result = fit(model, method="nuts", backend="pyro")  # doctest: +SKIP
>>> comparison = compare(model)  # every method, a verdict  # doctest: +SKIP
"""

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
