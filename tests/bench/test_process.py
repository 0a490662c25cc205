"""The worker a cell runs on (:func:`ppl_bnn.bench.process.cell_profile`): host devices only for
chains that run in parallel on them, and the suite's XLA optimisation only for XLA's cells."""

from __future__ import annotations

from ppl_bnn.bench.pool import Profile
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


def test_a_suites_xla_optimisation_reaches_the_profiles_of_its_xla_cells_only():
    suite = tiny_suite(
        backends=["numpyro", "pyro"],
        methods={"nuts": {"num_chains": 2}, "svi": {}},
        reference={"num_chains": 32},
        xla_optimisation="low",
    )
    profiles = {(c.method, c.backend): cell_profile(c, 2) for c in suite.cells()}
    assert {k: p.xla_optimisation for k, p in profiles.items()} == {
        ("nuts", "numpyro"): "low",
        ("nuts", "pyro"): None,  # torch compiles Pyro's programs, not XLA
        ("svi", "numpyro"): "low",
        ("svi", "pyro"): None,
    }
    assert profiles["nuts", "numpyro"].host_devices == 2
    (reference,) = suite.references()  # a reference keeps the process's flags
    assert cell_profile(reference.cell, 2).xla_optimisation is None


def test_a_cell_runs_only_on_a_worker_of_its_own_xla_optimisation():
    low, default = Profile(1, 1, "low"), Profile(1, 1)
    assert low.admits(Profile(1, 1, "low"))
    assert not low.admits(default) and not default.admits(low)
    assert Profile(1, None, "low").admits(Profile(1, 2, "low"))
