"""Every public name of hpcbridge has a docstring (as mpi4py checks for its own API)."""

import importlib
import inspect
import pkgutil

import pytest

import hpcbridge

MODULES = sorted(
    m.name for m in pkgutil.walk_packages(hpcbridge.__path__, "hpcbridge.")
    if not m.name.endswith("__main__")
)


@pytest.mark.parametrize("module_name", MODULES)
def test_public_names_have_docstrings(module_name):
    module = importlib.import_module(module_name)
    assert module.__doc__, f"module {module_name} has no docstring"
    missing = []
    for name in getattr(module, "__all__", []):
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not inspect.getdoc(obj):
            missing.append(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith(("_", "test_")) or not callable(member) and not isinstance(member, property):
                    continue
                if not inspect.getdoc(getattr(obj, attr)):
                    missing.append(f"{name}.{attr}")
    assert not missing, f"{module_name}: no docstring for {missing}"
