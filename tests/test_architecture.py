"""The layers ask a backend what it can do (``capabilities``, base-class hooks); none names a
backend's class outside the backend's own package, so a new backend needs no change above it."""

import ast
from importlib.metadata import entry_points
from pathlib import Path

import hpcbridge

PACKAGE = Path(hpcbridge.__file__).parent


def _backend_classes() -> dict[str, Path]:
    """Class name -> the package directory that defines it, for every registered backend."""
    owners = {}
    for entry in entry_points(group="hpcbridge.backends"):
        module, _, name = entry.value.partition(":")
        parts = module.split(".")[1:-1]  # hpcbridge.plfs.fs -> plfs
        owners[name] = PACKAGE.joinpath(*parts)
    return owners


def _names(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id, node.lineno
        elif isinstance(node, ast.Attribute):
            yield node.attr, node.lineno
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                yield alias.name, node.lineno


def test_every_registered_backend_is_checked():
    owners = _backend_classes()
    assert {"PosixFileSystem", "MemoryFileSystem", "HdfsFileSystem", "PlfsFileSystem"} <= set(owners)


def test_no_backend_class_is_named_outside_its_package():
    owners = _backend_classes()
    found = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for name, line in _names(tree):
            owner = owners.get(name)
            if owner is not None and owner not in path.parents:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line} names {name}")
    assert not found, "use capabilities or a FileSystem hook instead:\n" + "\n".join(found)


def test_the_check_sees_a_backend_named_elsewhere():
    # The scan itself: an isinstance on a backend class, as the layers above once did, is found.
    tree = ast.parse("from ..plfs.fs import PlfsFileSystem\nok = isinstance(fs, PlfsFileSystem)\n")
    assert [n for n, _ in _names(tree) if n == "PlfsFileSystem"] == ["PlfsFileSystem", "PlfsFileSystem"]
