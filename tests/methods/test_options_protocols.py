"""The options interface is declared: every method's options class has what ``fit`` and its
driver read, and a method whose options class lacks a member is refused where it is defined."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ppl_bnn.methods import METHODS
from ppl_bnn.methods.base import (
    DRIVER_OPTIONS,
    Family,
    KernelOptions,
    Method,
    MethodOptions,
    NearModeOptions,
    options_missing,
)
from ppl_bnn.methods.sgld import SGLDOptions


@pytest.mark.parametrize("method", METHODS, ids=lambda m: m.name)
def test_every_options_class_satisfies_its_protocols(method):
    assert MethodOptions in method.options_protocols()
    for protocol in method.options_protocols():
        assert options_missing(method.options, protocol) == ()
    if method.driver in DRIVER_OPTIONS:
        assert DRIVER_OPTIONS[method.driver] in method.options_protocols()
    assert (NearModeOptions in method.options_protocols()) == method.predicts_near_modes


@dataclass(frozen=True)
class _Bare:
    num_samples: int = 10

    @property
    def kept_draws(self) -> int:
        return self.num_samples


def test_an_options_class_short_of_its_protocols_is_refused_by_member():
    with pytest.raises(TypeError, match=r"method 'bare': its options class _Bare has no "
                       r"matrix_floats \(MethodOptions"):  # fmt: skip
        Method(name="bare", summary="", options=_Bare, family=Family.MARKOV_CHAIN, smoke={},
               driver="hmc")  # fmt: skip


def test_a_driver_reads_its_own_protocol():
    @dataclass(frozen=True)
    class NoKernel(_Bare):
        def matrix_floats(self, num_weights: int) -> int:
            return 0

    assert options_missing(SGLDOptions, KernelOptions) == ()
    with pytest.raises(TypeError, match=r"NoKernel has no kernel \(KernelOptions"):
        Method(name="bare", summary="", options=NoKernel, family=Family.MARKOV_CHAIN, smoke={},
               driver="sgmcmc")  # fmt: skip
    with pytest.raises(TypeError, match=r"NoKernel has no kept_iterate \(NearModeOptions"):
        Method(name="bare", summary="", options=NoKernel, family=Family.OPTIMISATION, smoke={},
               driver="hmc", predicts_near_modes=True)  # fmt: skip
