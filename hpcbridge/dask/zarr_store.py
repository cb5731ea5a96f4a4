"""A read-only Zarr store (zarr-python 3) over any hpcbridge file system.

:class:`HpcbridgeZarrStore` serves the keys of a Zarr hierarchy (``zarr.json``, ``.zarray``,
chunk objects such as ``c/0/1`` or ``0.1``) from the files under a root directory of any hpcbridge
backend: ``hdfs://``, ``plfs+hdfs://``, ``file://``, ... Every fetch is recorded
(:attr:`HpcbridgeZarrStore.fetched`) so a read task can report which hosts served its bytes.

>>> import zarr, hpcbridge
>>> fs, root = hpcbridge.url_to_fs("file:///data/run.zarr")            # doctest: +SKIP
>>> zarr.open_array(HpcbridgeZarrStore(fs, root), mode="r")[:2]         # doctest: +SKIP

This module imports zarr; :func:`hpcbridge.dask.read_zarr` imports it only when called.
"""

from __future__ import annotations

import asyncio
import posixpath
import threading

from zarr.abc.store import OffsetByteRequest, RangeByteRequest, Store, SuffixByteRequest
from zarr.core.buffer.core import default_buffer_prototype

__all__ = ["HpcbridgeZarrStore"]

#: Errors of a key that is not a readable file: the key is absent (zarr then uses the fill value).
_ABSENT = (FileNotFoundError, IsADirectoryError, NotADirectoryError)


class _ReadOnlyStore(NotImplementedError, ValueError):
    """A writable copy of a read-only store was asked for."""


class HpcbridgeZarrStore(Store):
    """Read-only Zarr store of the files under directory ``root`` of hpcbridge file system ``fs``.

    Parameters
    ----------
    fs:
        An hpcbridge file system (:func:`hpcbridge.connect`, :func:`hpcbridge.url_to_fs`).
    root:
        The directory of the Zarr hierarchy on ``fs``.
    """

    supports_writes: bool = False
    supports_deletes: bool = False
    supports_partial_writes: bool = False
    supports_listing: bool = True

    def __init__(self, fs, root: str, *, read_only: bool = True) -> None:
        super().__init__(read_only=True)
        self.fs = fs
        self.root = "/" + root.strip("/") if root.strip("/") else "/"
        if not read_only:  # zarr's Store.open(..., read_only=False) passes it here
            raise ValueError(f"{self}: hpcbridge Zarr stores are read-only (read_only=False was asked)")
        #: Storage fetches: ``[(path, offset, length)]``, in the order they completed.
        self.fetched: list[tuple[str, int, int]] = []
        self._lock = threading.Lock()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HpcbridgeZarrStore) and other.fs == self.fs and other.root == self.root

    def __hash__(self) -> int:
        return hash((type(self), self.root))

    def __repr__(self) -> str:
        return f"HpcbridgeZarrStore({self.fs.url(self.root)!r})"

    def __str__(self) -> str:
        return self.fs.url(self.root)

    def __getstate__(self):
        return {"fs": self.fs, "root": self.root}

    def __setstate__(self, state) -> None:
        self.__init__(state["fs"], state["root"])

    def with_read_only(self, read_only: bool = False) -> "HpcbridgeZarrStore":
        """This store (it is read-only; asking for a writable one raises what zarr's ``Store``
        raises, ``NotImplementedError``, also a ``ValueError``)."""
        if not read_only:
            raise _ReadOnlyStore(f"with_read_only is not implemented for the {type(self)} store type. "
                                 f"({self}: hpcbridge Zarr stores are read-only)")
        return type(self)(self.fs, self.root)

    def path(self, key: str) -> str:
        """The file of ``key`` on the file system."""
        return posixpath.join(self.root, key.lstrip("/")) if key else self.root

    # -- reads --------------------------------------------------------------------------------
    def _read(self, key: str, byte_range) -> bytes:
        path = self.path(key)
        if byte_range is None:
            data = self.fs.read_bytes(path)
            offset = 0
        else:
            if isinstance(byte_range, RangeByteRequest):
                offset, length = byte_range.start, byte_range.end - byte_range.start
            elif isinstance(byte_range, OffsetByteRequest):
                offset, length = byte_range.offset, None
            elif isinstance(byte_range, SuffixByteRequest):
                size = self.fs.info(path).size
                offset, length = max(0, size - byte_range.suffix), None
            else:
                raise TypeError(f"Unexpected byte_range, got {byte_range!r} (for {self.fs.url(path)})")  # zarr's words
            if length is None:
                length = max(0, self.fs.info(path).size - offset)
            data = self.fs.pread(path, offset=offset, length=length)
        with self._lock:
            self.fetched.append((path, offset, len(data)))
        return data

    def _get(self, key, prototype, byte_range):
        try:
            data = self._read(key, byte_range)
        except _ABSENT:
            return None
        return (prototype or default_buffer_prototype()).buffer.from_bytes(data)

    async def get(self, key, prototype=None, byte_range=None):
        """The value of ``key`` (or a byte range of it), None if there is no such file."""
        return await asyncio.to_thread(self._get, key, prototype, byte_range)

    async def get_partial_values(self, prototype, key_ranges):
        """The values of ``(key, byte range)`` pairs, read concurrently (None: absent)."""
        return list(await asyncio.gather(*(self.get(k, prototype, r) for k, r in key_ranges)))

    async def exists(self, key: str) -> bool:
        """Whether ``key`` is a file."""
        return await asyncio.to_thread(self.fs.isfile, self.path(key))

    # -- writes: refused ----------------------------------------------------------------------
    async def set(self, key, value) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    async def delete(self, key) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    # -- listing ------------------------------------------------------------------------------
    def _find(self, prefix: str) -> list[str]:
        # Keys are matched as strings: "c/1" matches "c/1/0" and "c/10/0", so list from the
        # directory holding the prefix's last component.
        prefix = prefix.lstrip("/")
        base = self.path(prefix.rsplit("/", 1)[0] if "/" in prefix else "")
        try:
            files = self.fs.find(base)
        except _ABSENT:
            return []
        cut = len(self.root.rstrip("/")) + 1
        return sorted(f[cut:] for f in files if f[cut:].startswith(prefix))

    async def list(self):
        """Every key of the store."""
        for key in await asyncio.to_thread(self._find, ""):
            yield key

    async def list_prefix(self, prefix: str):
        """The keys starting with ``prefix``."""
        for key in await asyncio.to_thread(self._find, prefix):
            yield key

    async def list_dir(self, prefix: str):
        """The names directly under ``prefix`` (files and directories)."""
        base = self.path(prefix.rstrip("/")) if prefix.strip("/") else self.root
        try:
            entries = await asyncio.to_thread(lambda: list(self.fs.iterdir(base)))
        except _ABSENT:
            return
        for name in sorted(posixpath.basename(e.path.rstrip("/")) for e in entries):
            yield name
