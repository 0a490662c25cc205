"""``fullrank``: Gaussian VI with a full covariance (``AutoMultivariateNormal``; small networks;
see :mod:`ppl_bnn.methods.optimisation`). Each backend scores the guide's draws from their own
noise rather than by a float32 triangular solve (:mod:`ppl_bnn.backends.numpyro.guides`), which
an ill-conditioned factor turns into noise that the optimisation then exploits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ppl_bnn.methods.base import Family, Method
from ppl_bnn.methods.optimisation import GaussianGuideOptions


@dataclass(frozen=True, kw_only=True)
class FullRankOptions(GaussianGuideOptions):
    r"""Options of ``fit(..., method="fullrank")``; as :class:`GaussianGuideOptions` but for
    two defaults.

    The guide's Cholesky factor :math:`L` has :math:`d(d+1)/2` entries for :math:`d` weights,
    and each one's one-draw gradient, :math:`g_i\varepsilon_j` with :math:`g = \nabla_z \log
    p(y, z)`, has a variance that does not shrink as the fit converges. Adam moves every entry
    by about its step whatever the gradient's size, so with the mean-field guide's settings
    (one draw, ``learning_rate=0.01``) this noise keeps the covariance too wide: the fit can
    end at a higher loss than the mean-field guide, which its family contains, and predict no
    better than ``svi``. Hence the defaults:

    Attributes:
        num_particles: 4 draws per gradient (a quarter of the variance; on NumPyro and on Pyro
            the draws are one vectorised pass, which cost little beside the :math:`O(d^2)`
            update of :math:`L`).
        learning_rate: 0.003, a lower noise floor for Adam's steps on :math:`L`.

    Each helps alone, and the two together most (``benchmarks/defaults_audit.py``;
    docs/defaults.md, "The Gaussian guides").
    """

    GUIDE: ClassVar[str] = "AutoMultivariateNormal"

    num_particles: int = 4
    learning_rate: float = 0.003

    def matrix_floats(self, num_weights: int) -> int:
        """The guide's Cholesky factor: one float per pair of weights."""
        return num_weights * num_weights


METHOD = Method(
    name="fullrank",
    summary="Gaussian VI, full covariance",
    options=FullRankOptions,
    family=Family.OPTIMISATION,
    smoke={"num_steps": 30, "num_draws": 5, "init_map_steps": 20},
    driver="autoguide",
    learns_hyperparameters=True,
)
