"""A Hypothesis state machine comparing a backend with a plain in-memory model.

Random sequences of create / write / pwrite / append / pread / rename / rm / mkdir / ls run on
the backend and on :class:`Model` (a dict of paths to bytes, and a set of directories); every
result and every error class must agree. The model is deliberately simpler than any backend,
so a disagreement points at the backend.

Use :func:`state_machine_for` with a factory returning ``(fs, root)``::

    TestPosixStateful = state_machine_for(lambda: (hpcbridge.connect("/"), tempfile.mkdtemp()))
    TestPosixStateful = TestPosixStateful.TestCase
"""

from __future__ import annotations

import io
from collections.abc import Callable

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

__all__ = ["Model", "state_machine_for"]

NAMES = st.sampled_from(["a", "b", "c", "d/a", "d/b", "e/f"])
DATA = st.binary(max_size=300)
OFFSETS = st.integers(min_value=0, max_value=400)


class Model:
    """The expected state: files (path -> bytearray) and directories, relative to the root."""

    def __init__(self):
        self.files: dict[str, bytearray] = {}
        self.dirs: set[str] = {""}

    @staticmethod
    def parent(name: str) -> str:
        """The directory holding ``name``."""
        return name.rsplit("/", 1)[0] if "/" in name else ""

    def error_for_create(self, name: str) -> type[Exception] | None:
        """The error creating file ``name`` must raise, or None if it must succeed."""
        if name in self.dirs:
            return IsADirectoryError
        parent = self.parent(name)
        if parent in self.files:
            return NotADirectoryError
        if parent not in self.dirs:
            return FileNotFoundError
        return None

    def error_for_rename(self, src: str, dst: str) -> type[Exception] | None:
        """The error renaming file ``src`` to ``dst`` must raise, or None."""
        if src not in self.files:
            return FileNotFoundError
        if dst in self.dirs:
            return IsADirectoryError
        return self.error_for_create(dst)


def state_machine_for(factory: Callable[[], tuple[object, str]]) -> type[RuleBasedStateMachine]:
    """A state machine class (use its ``.TestCase``) testing the backend ``factory`` makes."""

    class BackendStateMachine(RuleBasedStateMachine):
        """Backend vs model on random operation sequences."""

        @initialize()
        def setup(self):
            self.fs, self.root = factory()
            self.model = Model()
            self.caps = self.fs.capabilities

        def path(self, name: str) -> str:
            return f"{self.root}/{name}" if name else self.root

        def expect(self, error, operation):
            """Run ``operation``; it must raise ``error`` (a class) or succeed if error is None."""
            if error is None:
                return operation()
            try:
                operation()
            except error:
                return None
            raise AssertionError(f"expected {error.__name__}")

        @rule(name=NAMES, data=DATA)
        def create(self, name, data):
            error = self.model.error_for_create(name)
            self.expect(error, lambda: self.fs.write_bytes(self.path(name), data))
            if error is None:
                self.model.files[name] = bytearray(data)

        @rule(name=NAMES, data=DATA, offset=OFFSETS)
        def pwrite(self, name, data, offset):
            if not self.caps.positional_write:
                self.expect(io.UnsupportedOperation, lambda: self.fs.pwrite(self.path(name), data, offset))
                return
            error = self.model.error_for_create(name)
            self.expect(error, lambda: self.fs.pwrite(self.path(name), data, offset))
            if error is None:
                content = self.model.files.setdefault(name, bytearray())
                # As pwrite(2): writing nothing does not extend the file.
                if data and len(content) < offset + len(data):
                    content.extend(bytes(offset + len(data) - len(content)))
                content[offset:offset + len(data)] = data

        @precondition(lambda self: self.caps.append)
        @rule(name=NAMES, data=DATA)
        def append(self, name, data):
            error = self.model.error_for_create(name)

            def run():
                with self.fs.open(self.path(name), "ab") as f:
                    f.write(data)

            self.expect(error, run)
            if error is None:
                self.model.files.setdefault(name, bytearray()).extend(data)

        @rule(name=NAMES, offset=OFFSETS, length=st.integers(0, 200))
        def pread(self, name, offset, length):
            if name not in self.model.files:
                error = IsADirectoryError if name in self.model.dirs else (FileNotFoundError, NotADirectoryError)
                self.expect(error, lambda: self.fs.pread(self.path(name), offset=offset, length=length))
                return
            assert self.fs.pread(self.path(name), offset=offset, length=length) == bytes(
                self.model.files[name][offset:offset + length])

        @rule(src=NAMES, dst=NAMES)
        def rename(self, src, dst):
            if src == dst or src in self.model.dirs:
                return  # directory renames are covered by the conformance suite
            error = self.model.error_for_rename(src, dst)
            exists = dst in self.model.files or dst in self.model.dirs
            if src in self.model.files and exists and not self.caps.rename_replaces:
                error = FileExistsError  # such backends refuse any existing destination first
            self.expect(error, lambda: self.fs.rename(self.path(src), self.path(dst)))
            if error is None:
                self.model.files[dst] = self.model.files.pop(src)

        @rule(name=NAMES)
        def rm(self, name):
            if name in self.model.dirs:
                return
            error = None if name in self.model.files else (FileNotFoundError, NotADirectoryError)
            self.expect(error, lambda: self.fs.rm(self.path(name)))
            self.model.files.pop(name, None)

        @rule(name=st.sampled_from(["d", "e"]))
        def mkdir(self, name):
            if name in self.model.files:
                error = FileExistsError
            elif name in self.model.dirs:
                error = FileExistsError
            else:
                error = None
            self.expect(error, lambda: self.fs.mkdir(self.path(name)))
            if error is None:
                self.model.dirs.add(name)

        @invariant()
        def listing_matches(self):
            if not hasattr(self, "model"):
                return
            for directory in self.model.dirs:
                expected = sorted(
                    self.path(p) for p in [*self.model.files, *self.model.dirs]
                    if p and self.model.parent(p) == directory
                )
                assert self.fs.ls(self.path(directory)) == expected
            for name, content in self.model.files.items():
                assert self.fs.info(self.path(name)).size == len(content)

        def teardown(self):
            if hasattr(self, "fs"):
                self.fs.rm(self.root, recursive=True)

    return BackendStateMachine
