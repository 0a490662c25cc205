"""What a method is (:class:`Method`), what its run returns
(:class:`~ppl_bnn.methods.output.RunOutput`), and the errors a method raises when it breaks
down."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from functools import partial
from typing import Any, ClassVar, Protocol

from ppl_bnn.engine.contracts import protocol_members
from ppl_bnn.engine.registry import backend_names, declaration, get_driver, option_owners
from ppl_bnn.methods import shared
from ppl_bnn.methods.output import RunOutput


class Family(StrEnum):
    """How a method produces its draws."""

    #: A fitted distribution (or point) from an optimisation: SVI, MAP, Laplace.
    OPTIMISATION = "optimisation"
    #: Draws of Markov chains (convergence diagnostics and ESS apply): NUTS, HMC, SG-MCMC.
    MARKOV_CHAIN = "markov_chain"
    #: Independent fits combined as equally weighted draws: deep ensembles.
    ENSEMBLE = "ensemble"


#: Metadata key of an options field that one backend alone reads.
BACKEND_ONLY = "backend_only"


def backend_option(default: Any) -> Any:
    """An options dataclass field that one backend alone reads (e.g. Pyro's ``potential``).

    The backend that reads it lists it in its declaration
    (:attr:`~ppl_bnn.engine.registry.BackendDeclaration.own_options`), with the values it
    takes; ``fit`` refuses the option, when given, on any other backend (see
    :func:`option_backends`).
    """
    return field(default=default, metadata={BACKEND_ONLY: True})


def option_backends(options: type) -> dict[str, str]:
    """``{option: backend}`` for each field of the options class ``options`` that one backend
    alone reads: the backend whose declaration lists it.

    Raises:
        LookupError: A field declared with :func:`backend_option` that no backend lists.
    """
    owners = option_owners()
    out = {}
    for f in fields(options):
        if BACKEND_ONLY in f.metadata:
            if f.name not in owners:
                raise LookupError(
                    f"option {f.name!r} of {options.__name__} is one backend's own, but no "
                    "backend's declaration lists it (BackendDeclaration.own_options)"
                )
            out[f.name] = owners[f.name]
    return out


class MethodOptions(Protocol):
    """What ``fit`` reads of every method's options dataclass, before it runs
    (:mod:`ppl_bnn.methods.memory`)."""

    @property
    def kept_draws(self) -> int:
        """The draws the result holds (all chains)."""

    def matrix_floats(self, num_weights: int) -> int:
        """The floats of the method's covariance, mass matrix or deviations at
        ``num_weights`` weights (0 where it has none)."""


class NearModeOptions(MethodOptions, Protocol):
    """The options of a method that predicts near modes (``Method.predicts_near_modes``)."""

    def kept_iterate(self, num_data: int) -> str:
        """Which iterate the fit keeps at ``num_data`` training points: ``"validation"`` (the
        best on a held-out share, early stopping) or ``"lowest"`` (the lowest loss)."""


class GuideOptions(MethodOptions, Protocol):
    """The options the ``autoguide`` driver reads: the guide by name."""

    GUIDE: ClassVar[str]


class KernelOptions(MethodOptions, Protocol):
    """The options the ``sgmcmc`` driver reads: ``kernel(...) -> (init, step)``, a pure pair of
    functions of the sampler state (:mod:`ppl_bnn.methods.sgmcmc`)."""

    def kernel(self, *args: Any, **kwargs: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """The sampler's ``(init, step)``, with the framework's elementwise functions given
        (``cos``) and, where a compiled program passes it as an argument, the step size
        (``step_size``, in place of the options' own)."""


#: The options protocol each driver reads, beyond :class:`MethodOptions`.
DRIVER_OPTIONS: dict[str, type] = {"autoguide": GuideOptions, "sgmcmc": KernelOptions}


def options_missing(options: type, protocol: type) -> tuple[str, ...]:
    """The members of ``protocol`` that the options class ``options`` lacks."""
    return tuple(m for m in protocol_members(protocol) if not hasattr(options, m))


#: ``(name, target, options, seed) -> RunOutput``: drivers and backend-neutral run functions.
RunFunction = Callable[..., RunOutput]


@dataclass(frozen=True, kw_only=True)
class Method:
    """One inference method: its options, its family, and how it runs on each backend.

    A method runs either through a *driver* that a backend may declare
    (``ppl_bnn/backends/<backend>/<driver>.py``, e.g. ``autoguide``; see
    :class:`~ppl_bnn.engine.registry.BackendDeclaration`), configured by the method's options
    class, or through a backend-neutral ``run`` (e.g. an ensemble of another method) that uses
    the drivers and modules it ``requires``. It runs on the backends that declare them.

    Attributes:
        name: What ``fit(..., method=name)`` takes.
        summary: One line for listings.
        options: The frozen options dataclass (checked in ``__post_init__``).
        family: :class:`Family`.
        smoke: Options for a tiny, fast fit (the conformance tests run every method with them).
        driver: The backend driver that runs it, or None when ``run`` is given.
        run: A backend-neutral run function ``(name, target, options, seed)``.
        requires: The drivers and modules ``run`` uses on the target's backend.
        exact: A Markov chain with a Metropolis correction on the full-data posterior, exact
            in the limit of many draws (reports show its rank plots and weight summaries).
        learns_hyperparameters: It maximises an objective over which a learned prior's
            hyperparameters can be fitted too (the ELBO or the log joint); ``fit`` refuses a
            learned prior for any other method.
        needs_mode: Its answer is a mode of the log joint over every site, or is built around
            one (MAP, its ensembles, Laplace, SWAG, MC dropout): ``fit`` refuses a hierarchical
            prior (:class:`~ppl_bnn.model.priors.HierarchicalPrior`), whose joint has no mode.
        records_curves: It records training curves (:mod:`ppl_bnn.methods.curves`), so
            ``fit`` takes a ``validation=`` set for it.
        shared: Its runs may be intercepted (:mod:`ppl_bnn.methods.shared`; a benchmark's
            shared-fit store, :mod:`ppl_bnn.bench.fit_store`): other contestants start from
            them (MAP's mode), so a results folder fits each once.
        predicts_near_modes: Its predictive is made of posterior modes and what SGD finds near
            them (``map``, ``swag``, ``ensemble``), with no curvature term to widen it: on
            few training points per weight a mode fits the training noise, and ``fit``
            warns (:data:`MIN_POINTS_PER_WEIGHT`) unless the fit stops early.
        tuned_by_default: The option no one default of which holds on every set
            (``benchmarks/defaults_audit.py``), then the options that, given, choose it
            otherwise (``mcdropout``: ``dropout_rate``, or ``concrete``, which learns it).
            ``fit`` logs a warning where none of them is given, and the suites run the method
            tuned on a validation split (:mod:`ppl_bnn.bench.tuning`) beside its default.
        unavailable: Why a backend without its driver has none (``mclmc``: BlackJAX runs on
            JAX only); the error that refuses such a backend says so.
    """

    name: str
    summary: str
    options: type
    family: Family
    smoke: Mapping[str, Any]
    driver: str | None = None
    run: RunFunction | None = None
    requires: tuple[str, ...] = ()
    exact: bool = False
    learns_hyperparameters: bool = False
    needs_mode: bool = False
    records_curves: bool = False
    shared: bool = False
    predicts_near_modes: bool = False
    tuned_by_default: tuple[str, ...] = ()
    unavailable: str = ""

    def __post_init__(self) -> None:
        if (self.driver is None) == (self.run is None):
            raise ValueError(f"method {self.name!r} needs exactly one of driver= and run=")
        if self.driver is not None and self.requires:
            raise ValueError(f"method {self.name!r}: requires= is for a run=, not a driver")
        for protocol in self.options_protocols():
            missing = options_missing(self.options, protocol)
            if missing:
                raise TypeError(
                    f"method {self.name!r}: its options class {self.options.__name__} has no "
                    f"{', '.join(missing)} ({protocol.__name__}, ppl_bnn.methods.base)"
                )

    def options_protocols(self) -> tuple[type, ...]:
        """The protocols its options class satisfies: :class:`MethodOptions`, and those its
        driver and :attr:`predicts_near_modes` read."""
        out: list[type] = [MethodOptions]
        if self.driver in DRIVER_OPTIONS:
            out.append(DRIVER_OPTIONS[self.driver])
        if self.predicts_near_modes:
            out.append(NearModeOptions)
        return tuple(out)

    @property
    def needs(self) -> tuple[str, ...]:
        """The drivers and modules a backend must declare to run it."""
        return self.requires if self.driver is None else (self.driver,)

    def missing_on(self, backend: str) -> tuple[str, ...]:
        """What of :attr:`needs` backend ``backend`` does not declare."""
        declared = declaration(backend)
        return tuple(n for n in self.needs if n not in (*declared.drivers, *declared.modules))

    @property
    def backends(self) -> tuple[str, ...]:
        """The backends it runs on: those that declare what it needs."""
        return tuple(b for b in backend_names() if not self.missing_on(b))

    def run_on(self, backend: str) -> RunFunction:
        """``(name, target, options, seed) -> RunOutput`` on ``backend``: its backend's driver,
        or its own backend-neutral ``run``."""
        run = self.run if self.run is not None else get_driver(backend, self.driver)
        return shared.stored(self.name, run) if self.shared else run


#: Training points per weight below which ``fit`` warns for a method that predicts near modes.
#: Kept at its mode with the noise learned, ``map`` fell below the constant predictor on the
#: sets with fewer points per weight than this and stayed above it on those with more
#: (``benchmarks/defaults_audit.py --option map.keep=lowest``; docs/defaults.md).
MIN_POINTS_PER_WEIGHT = 4


class DivergedError(RuntimeError):
    """A method broke down numerically (a non-finite loss, draw, step or log density) and has
    no usable draw to return; raised alike by every backend (see
    :mod:`ppl_bnn.methods.divergence`).

    Attributes:
        method: The method's name.
        step: The step it broke down at; a list (one entry per chain or ensemble member, None
            for those that did not) where several ran; None where no step applies (a sampler
            with no finite starting point, non-finite draws).
        sites: The sites whose values became non-finite, where known.
        cause: The likely cause, in words.
    """

    def __init__(
        self,
        message: str,
        *,
        method: str = "",
        step: int | list[int | None] | None = None,
        sites: Sequence[str] = (),
        cause: str = "",
    ) -> None:
        super().__init__(message)
        self.method, self.step, self.sites, self.cause = method, step, tuple(sites), cause

    def details(self) -> dict[str, Any]:
        """The ``info`` entries a result marked diverged carries, for this breakdown."""
        return {
            "diverged": True,
            "diverged_at_step": self.step,
            "diverged_sites": list(self.sites),
            "diverged_cause": self.cause,
        }

    def __reduce__(self) -> tuple[Any, ...]:
        fields = {"method": self.method, "step": self.step, "sites": self.sites}
        return (partial(type(self), cause=self.cause, **fields), (str(self),))


class HessianError(RuntimeError):
    """The Hessian of the negative log joint at the optimum is not positive definite."""
