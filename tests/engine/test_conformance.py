"""Every registered backend conforms to its declaration and the contracts; a third backend
written from the documented contract joins by its package, is checked the same way, and is
refused by name for a method whose driver it lacks."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ppl_bnn import BNN, fit
from ppl_bnn.engine import registry
from ppl_bnn.engine.conformance import DRIVER_PARAMETERS, OPS_MEMBERS, check_conformance
from ppl_bnn.methods import METHODS, available, get_method
from ppl_bnn.runtime import configure_runtime
from ppl_bnn.versions import library_versions


@pytest.mark.parametrize("backend", registry.backend_names())
def test_every_registered_backend_conforms(backend):
    assert check_conformance(backend) == []


@pytest.mark.parametrize("backend", registry.backend_names())
def test_a_backends_package_imports_no_framework_to_declare_itself(backend):
    declared = registry.declaration(backend)
    assert declared.name == backend
    assert declared.drivers and len(set(declared.drivers)) == len(declared.drivers)


@pytest.mark.parametrize("method", METHODS, ids=lambda m: m.name)
def test_a_method_runs_on_the_backends_that_declare_what_it_needs(method):
    for backend in registry.backend_names():
        declared = registry.declaration(backend)
        has = set(declared.drivers) | set(declared.modules)
        assert (backend in method.backends) == (set(method.needs) <= has)


#: A backend written from the contract only: ``ops`` with every member of
#: ``ppl_bnn.engine.contracts.Backend`` and one driver, ``autoguide``.
STUB_OPS = """
name = "stub"
ppl = None


def model(spec, dropout=None):
    raise NotImplementedError


def log_joint(spec):
    raise NotImplementedError


def data(spec, x, y):
    return x, y


def log_density(spec, x, y, params, likelihood_scale=1.0):
    raise NotImplementedError


def grad_log_density(spec, x, y, params):
    raise NotImplementedError


def forward_draws(spec, params, x):
    raise NotImplementedError


def fit_compilations():
    return None
"""


def _write_stub(root: Path, package: str, ops: str, drivers: tuple[str, ...]) -> None:
    folder = root / package
    folder.mkdir()
    (folder / "__init__.py").write_text(
        "from ppl_bnn.engine.registry import BackendDeclaration\n\n"
        f"BACKEND = BackendDeclaration(name={package!r}, framework='numpy', "
        f"drivers={drivers!r})\n"
    )
    (folder / "ops.py").write_text(ops.replace('"stub"', repr(package)))
    for driver in drivers:
        (folder / f"{driver}.py").write_text(
            textwrap.dedent(
                """
                def run(name, target, options, seed):
                    raise NotImplementedError
                """
            )
        )


@pytest.fixture
def third_backend(tmp_path, monkeypatch):
    """The registry with a stub backend ``stub`` (package ``stub``) added, restored after."""
    monkeypatch.setattr(registry, "_packages", dict(registry._packages))
    monkeypatch.setattr(registry, "_declarations", dict(registry._declarations))
    monkeypatch.syspath_prepend(str(tmp_path))
    _write_stub(tmp_path, "stub", STUB_OPS, ("autoguide",))
    yield registry.register_backend("stub")
    for module in [m for m in sys.modules if m == "stub" or m.startswith("stub.")]:
        del sys.modules[module]


def test_a_third_backend_joins_and_conforms(third_backend):
    assert third_backend == "stub"
    assert registry.backend_names()[-1] == "stub"
    assert check_conformance("stub") == []
    assert "stub" in get_method("map", "stub").backends
    assert "stub" in available()["ensemble"]
    assert "stub" not in available()["nuts"]


def test_a_third_backend_is_refused_by_name_where_it_lacks_a_driver(third_backend):
    with pytest.raises(ValueError, match=r"'nuts' is not available on backend 'stub': it "
                       r"declares no 'hmc'; it runs on: numpyro, pyro"):  # fmt: skip
        get_method("nuts", "stub")
    with pytest.raises(ValueError, match=r"'laplace' .* declares no 'jacobian' and no "
                       r"'linearised'"):  # fmt: skip
        get_method("laplace", "stub")
    model = BNN(np.zeros((4, 1)), np.arange(4.0), hidden=[2])
    with pytest.raises(ValueError, match=r"'sgld' is not available on backend 'stub'"):
        fit(model, "sgld", backend="stub")


def test_runtime_settings_and_recorded_versions_come_from_the_declarations(
    third_backend, monkeypatch
):
    applied = {}
    for backend in registry.backend_names():
        if "runtime" in registry.declaration(backend).modules:
            module = registry.get_module(backend, "runtime")
            monkeypatch.setattr(module, "configure", lambda s, b=backend: applied.update({b: s}))
    configure_runtime(torch_threads=1)  # the stub declares no runtime module: left out
    assert set(applied) == {"numpyro", "pyro"}
    assert applied["pyro"] == {
        "host_devices": None,
        "torch_threads": 1,
        "jax_cache": None,
        "xla_optimisation": None,
    }
    versions = library_versions.__wrapped__()
    for backend in registry.backend_names():
        assert set(registry.declaration(backend).packages) <= set(versions)
    assert {"numpyro", "jax", "torch", "pyro-ppl", "arviz", "ppl_bnn"} <= set(versions)


def test_a_backend_short_of_the_contract_is_told_what_it_lacks(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "_packages", dict(registry._packages))
    monkeypatch.setattr(registry, "_declarations", dict(registry._declarations))
    monkeypatch.syspath_prepend(str(tmp_path))
    ops = STUB_OPS.replace("def forward_draws(spec, params, x):", "def forward(spec, params, x):")
    _write_stub(tmp_path, "short", ops, ("autoguide", "hmc"))
    (tmp_path / "short" / "hmc.py").write_text("def run(target, options):\n    pass\n")
    registry.register_backend("short")
    problems = check_conformance("short")
    assert "short: ops has no 'forward_draws' (Backend contract)" in problems
    assert any("driver 'hmc'" in p and str(DRIVER_PARAMETERS) in p for p in problems)
    assert len(problems) == 2


def test_the_contract_is_read_from_the_protocol():
    assert {"name", "ppl", "model", "data", "log_density", "forward_draws"} <= set(OPS_MEMBERS)


def test_a_package_without_a_declaration_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "_packages", dict(registry._packages))
    monkeypatch.setattr(registry, "_declarations", dict(registry._declarations))
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "undeclared").mkdir()
    (tmp_path / "undeclared" / "__init__.py").write_text("BACKEND = 'numpyro'\n")
    with pytest.raises(ValueError, match=r"'undeclared' exports no BACKEND = "
                       r"BackendDeclaration\(\.\.\.\).*got str"):  # fmt: skip
        registry.register_backend("undeclared")
    with pytest.raises(ValueError, match=r"unknown backend 'undeclared'; available: numpyro"):
        registry.check_backend("undeclared")


def test_a_name_taken_by_another_package_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "_packages", dict(registry._packages))
    monkeypatch.setattr(registry, "_declarations", dict(registry._declarations))
    monkeypatch.syspath_prepend(str(tmp_path))
    _write_stub(tmp_path, "impostor", STUB_OPS, ("autoguide",))
    init = tmp_path / "impostor" / "__init__.py"
    init.write_text(init.read_text().replace("name='impostor'", "name='pyro'"))
    with pytest.raises(ValueError, match=r"backend 'pyro' of 'impostor' is already "
                       r"'ppl_bnn.backends.pyro''s name"):  # fmt: skip
        registry.register_backend("impostor")


def test_an_undeclared_module_or_driver_is_refused_by_name():
    with pytest.raises(ValueError, match=r"backend 'pyro' has no driver 'mclmc'; its drivers: "):
        registry.get_driver("pyro", "mclmc")
    with pytest.raises(ValueError, match=r"backend 'numpyro' has no module 'potential'"):
        registry.get_module("numpyro", "potential")
