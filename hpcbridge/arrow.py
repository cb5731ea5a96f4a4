"""pyarrow file systems over any hpcbridge backend, for ``pyarrow.dataset`` and Parquet.

>>> import hpcbridge.arrow, pyarrow as pa, pyarrow.parquet as pq, tempfile
>>> fs, path = hpcbridge.arrow.filesystem_and_path("file://" + tempfile.mkdtemp())
>>> pq.write_table(pa.table({"x": [1, 2]}), path + "/t.parquet", filesystem=fs)
>>> pq.read_table(path + "/t.parquet", filesystem=fs).num_rows
2

Files reach Arrow as Python file objects (``pyarrow.PythonFile``). Arrow's own threads may drop
the last reference to one after the call that used it has returned (a Parquet read's readahead
state is released on an I/O thread); that takes the GIL, and if the interpreter is already
finalizing, Python ends the thread with ``pthread_exit``, whose unwinding through Arrow's C++
frames calls ``std::terminate``: the process aborts at exit ("terminate called without an active
exception", seen in 3 of 20 runs of a two-line write/read script with pyarrow 26). So files opened
here are tracked, and at exit (before finalization) the interpreter waits, up to
:data:`EXIT_WAIT` seconds, for those only native code still holds. The buffers such reads
returned are released on those threads too: the fsspec files behind them have the interpreter
wait at exit until Arrow's threads are idle (:mod:`hpcbridge.fs.native_exit`).
"""

from __future__ import annotations

import atexit
import errno
import gc
import os
import posixpath
import threading
import time
import types
import weakref

from .errors import MissingDependencyError
from .fs.fsspec_adapter import fsspec_class
from .fs.native_exit import EXIT_WAIT
from .fs.url import parse_url

__all__ = ["filesystem", "filesystem_and_path", "EXIT_WAIT"]

_open_files: weakref.WeakSet = weakref.WeakSet()
_handler_class = None
_handler_lock = threading.Lock()


def _pyarrow_fs():
    try:
        import pyarrow.fs as pafs
    except ImportError as exc:  # pragma: no cover - pyarrow is in the [arrow] extra
        raise MissingDependencyError(
            "hpcbridge.arrow needs pyarrow: pip install 'hpcbridge[arrow]'"
        ) from exc
    return pafs


def _held_by_native_code_only() -> int:
    """Tracked files alive that no Python object refers to: C++ references (Arrow's) keep them."""
    count = 0
    for ref in list(_open_files.data):  # weak references: this frame holds no file
        f = ref()
        if f is not None and not [r for r in gc.get_referrers(f) if not isinstance(r, types.FrameType)]:
            count += 1
        del f
    return count


def _wait_for_native_releases(timeout: float | None = None) -> None:
    """Wait until no tracked file is held only by Arrow's threads (sleeping, so they can take
    the GIL to release them); files the program itself still holds are not waited for."""
    deadline = time.monotonic() + (EXIT_WAIT if timeout is None else timeout)
    while _held_by_native_code_only() and time.monotonic() < deadline:
        time.sleep(0.002)


def _handler():
    """``FSSpecHandler`` whose files are tracked (defined on first use: pyarrow loads lazily)."""
    global _handler_class
    with _handler_lock:
        if _handler_class is None:
            import pyarrow as pa

            class _TrackingHandler(_pyarrow_fs().FSSpecHandler):
                def _track(self, f, mode: str):
                    _open_files.add(f)
                    return pa.PythonFile(f, mode=mode)

                # The backend's own errors (a directory: IsADirectoryError, a path under a
                # file: NotADirectoryError), as pyarrow's LocalFileSystem reports them.
                def open_input_stream(self, path):
                    return self._track(self.fs.open(path, mode="rb"), "r")

                def open_input_file(self, path):
                    return self._track(self.fs.open(path, mode="rb"), "r")

                def get_file_info(self, paths):
                    infos = []
                    for path in paths:
                        try:
                            infos.extend(super().get_file_info([path]))
                        except NotADirectoryError:  # under a file: not found, as LocalFileSystem says
                            infos.append(_pyarrow_fs().FileInfo(path, _pyarrow_fs().FileType.NotFound))
                    return infos

                # Arrow's move is a rename: a file or an empty directory at the destination is
                # replaced, a non-empty one refused (fsspec's mv would move into a directory).
                def move(self, src, dest):
                    src, dest = (posixpath.normpath(self.fs._strip_protocol(p)) for p in (src, dest))
                    self.fs.backend.info(src)  # a missing source: FileNotFoundError
                    if src != dest:
                        self.fs.backend.rename(src, dest)

                def copy_file(self, src, dest):
                    for path in (src, dest):
                        if self.fs.isdir(path):
                            raise IsADirectoryError(errno.EISDIR, "Is a directory (copy_file copies files)", path)
                    self.fs.cp_file(src, dest)

                def open_output_stream(self, path, metadata):
                    return self._track(self.fs.open(path, mode="wb"), "w")

                def open_append_stream(self, path, metadata):
                    return self._track(self.fs.open(path, mode="ab"), "w")

                # As pyarrow's LocalFileSystem: FSSpecHandler's fsspec calls would remove a file
                # asked to be deleted as a directory, and accept a directory made over a file.
                # Arrow's paths are literal, but FSSpecHandler deletes through fsspec's rm, which
                # expands globs: delete_dir("d*") removed every directory starting with "d", and
                # an entry named "[x]" was left behind by delete_dir_contents (another entry,
                # "x", removed in its place). So deletions go to the backend, path as given.
                def delete_dir(self, path):
                    self._refuse_file(path, NotADirectoryError, errno.ENOTDIR)
                    self.fs.backend.rm(self.fs._strip_protocol(path), recursive=True)

                def delete_dir_contents(self, path, missing_dir_ok=False):
                    self._refuse_file(path, NotADirectoryError, errno.ENOTDIR)
                    super().delete_dir_contents(path, missing_dir_ok)  # refuses the root

                def _delete_dir_contents(self, path, missing_dir_ok):
                    try:
                        entries = self.fs.backend.ls(self.fs._strip_protocol(path), detail=True)
                    except FileNotFoundError:
                        if missing_dir_ok:
                            return
                        raise
                    for entry in entries:
                        self.fs.backend.rm(entry.path, recursive=entry.is_dir)

                def delete_file(self, path):
                    self.fs.rm_file(path)  # a directory: IsADirectoryError, as LocalFileSystem says

                def create_dir(self, path, recursive):
                    self._refuse_file(path, FileExistsError, errno.EEXIST)
                    super().create_dir(path, recursive)

                def _refuse_file(self, path, kind, code):
                    if self.fs.isfile(path):
                        raise kind(code, f"{os.strerror(code)} (a file)", path)

            atexit.register(_wait_for_native_releases)
            # Pickled by reference (Dask workers, multiprocessing get the file system):
            # the name resolves through the module's __getattr__, defining it there too.
            _TrackingHandler.__qualname__ = "_TrackingHandler"
            _handler_class = _TrackingHandler
        return _handler_class


def __getattr__(name):
    """``_TrackingHandler``, the handler class, defined on first use (pickle finds it here)."""
    if name == "_TrackingHandler":
        return _handler()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def filesystem_and_path(url, **options):
    """Return ``(pyarrow.fs.FileSystem, path)`` for an hpcbridge URL.

    The file system is a ``PyFileSystem`` over an ``FSSpecHandler`` of the hpcbridge backend of
    the URL's scheme (its files tracked so the process exits cleanly; see the module);
    ``path`` is the URL's path, as pyarrow expects it.
    """
    pafs = _pyarrow_fs()
    parsed = parse_url(url)
    spec = fsspec_class(parsed.scheme)(parsed.netloc, **options)
    return pafs.PyFileSystem(_handler()(spec)), parsed.path


def filesystem(url, **options):
    """A pyarrow file system over the hpcbridge backend serving ``url``."""
    return filesystem_and_path(url, **options)[0]
