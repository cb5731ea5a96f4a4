"""The ``hpcbridge`` command line: ``ls``, ``stat``, ``layout``, ``put``, ``get`` (``--json`` on each)."""

from .main import build_parser, main

__all__ = ["main", "build_parser"]
