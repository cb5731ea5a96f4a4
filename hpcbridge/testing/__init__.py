"""Test kit shipped with hpcbridge: the backend conformance suite and the stateful model test.

A new backend is tested by subclassing :class:`FileSystemConformance` with three fixtures
(``fs``, ``root``, ``backdoor``) and by :func:`state_machine_for`; see tests/conformance/.
Importing this package needs pytest and Hypothesis (the ``[test]`` extra).
"""

from .conformance import Backdoor, FileSystemConformance
from .stateful import Model, state_machine_for

__all__ = ["FileSystemConformance", "Backdoor", "Model", "state_machine_for"]
