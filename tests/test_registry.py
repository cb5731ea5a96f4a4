"""The backend registry: lazy, extensible at run time and through entry points."""

import subprocess
import sys

import pytest

import hpcbridge
from hpcbridge.fs import registry
from hpcbridge.fs.memory import MemoryFileSystem
from hpcbridge.fs.posix import PosixFileSystem


def test_builtin_schemes_resolve():
    assert registry.backend_class("file") is PosixFileSystem
    assert registry.backend_class("memory") is MemoryFileSystem
    assert {"file", "memory"} <= set(registry.known_schemes())


def test_installed_entry_points_are_seen():
    assert registry._entry_point_table()["file"] == "hpcbridge.fs.posix:PosixFileSystem"


def test_register_backend_at_run_time_and_composite_lookup(monkeypatch):
    monkeypatch.setattr(registry, "_registered", {})
    monkeypatch.setattr(registry, "_loaded", {})

    class Wrapper(MemoryFileSystem):
        scheme = "wrap"

    registry.register_backend("wrap", Wrapper)
    assert registry.backend_class("wrap+file") is Wrapper  # composite falls back to the wrapper
    with pytest.raises(ValueError, match="already registered"):
        registry.register_backend("wrap", Wrapper)
    registry.register_backend("wrap", "hpcbridge.fs.memory:MemoryFileSystem", clobber=True)
    assert registry.backend_class("wrap") is MemoryFileSystem


def test_import_hpcbridge_loads_no_backend_and_no_heavy_dependency():
    code = ("import sys, hpcbridge; "
            "heavy = [m for m in ('hpcbridge.fs.posix', 'hpcbridge.fs.memory', 'mpi4py', 'h5py', 'pyarrow', "
            "'dask', 'fsspec', 'pandas') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_connect_returns_equal_filesystems_for_equal_urls():
    assert hpcbridge.connect("/a") == hpcbridge.connect("file:///b")
    assert hpcbridge.connect("/", block_size=1) != hpcbridge.connect("/")
