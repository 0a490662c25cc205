"""The worker a cell runs on (:func:`ppl_bnn.bench.process.cell_profile`): host devices only for
chains that run in parallel on them."""

from __future__ import annotations

from ppl_bnn.bench.process import cell_profile
from tests.bench.conftest import tiny_suite


def test_only_parallel_chains_get_a_host_device_each():
    suite = tiny_suite(
        backends=["numpyro", "pyro"],
        methods={
            "nuts": {"num_chains": 2},
            "hmc": {"num_chains": 2, "numpyro": {"chain_method": "vectorized"}},
            "mclmc": {"num_chains": 16},
            "sgld": {"num_chains": 2},
            "svi": {},
        },
        reference={"num_chains": 32},
        datasets=[{"name": "sine", "exclude": ["mclmc.pyro"]}],
    )
    devices = {(c.method, c.backend): cell_profile(c, 2).host_devices for c in suite.cells()}
    assert devices == {
        ("nuts", "numpyro"): 2,  # chain_method "auto": in parallel, a device each
        ("nuts", "pyro"): None,
        ("hmc", "numpyro"): 1,
        ("hmc", "pyro"): None,
        ("mclmc", "numpyro"): 1,  # vectorised: one device has every thread
        ("sgld", "numpyro"): 1,
        ("sgld", "pyro"): None,
        ("svi", "numpyro"): 1,
        ("svi", "pyro"): None,
    }
    (reference,) = suite.references()
    assert cell_profile(reference.cell, 2).host_devices == 1
