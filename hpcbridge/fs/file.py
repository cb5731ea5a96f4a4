"""File handles: open modes, the raw file interface every backend implements, buffered wrappers.

A backend's ``_open_raw`` returns an unbuffered *raw* file: an :class:`io.RawIOBase` that also
offers positional ``preadinto``/``pwrite`` (see :class:`RawFile`). :meth:`FileSystem.open`
wraps it in the standard :mod:`io` buffering classes, subclassed here only to add positional
I/O and clearer errors, so sequential ``read``/``readinto``/``write`` run at C speed and large
transfers go straight from the caller's buffer to the raw file without a copy.
"""

from __future__ import annotations

import codecs
import errno
import io
import operator
import os
import threading
from dataclasses import dataclass

from .buffers import read_new_bytes

__all__ = [
    "OpenMode",
    "RawFile",
    "BufferedReader",
    "BufferedWriter",
    "BufferedRandom",
    "wrap_raw",
    "text_codec",
    "check_text_arguments",
    "check_offset",
    "check_range",
    "writable_bytes",
    "readable_bytes",
    "MAX_OFFSET",
]

#: The largest file offset, and the largest ``offset + length`` of any access, on every backend:
#: ``off_t``'s maximum (POSIX), Java's ``long`` (HDFS).
MAX_OFFSET = 2**63 - 1

DEFAULT_BUFFER_SIZE = 1 << 20


@dataclass(frozen=True)
class OpenMode:
    """A parsed ``open`` mode, in the flags the backends act on."""

    readable: bool
    writable: bool
    create: bool
    truncate: bool
    exclusive: bool
    append: bool
    text: bool
    mode: str

    @classmethod
    def parse(cls, mode: str, url: str) -> "OpenMode":
        """Parse a Python ``open`` mode (``rb``, ``wb``, ``ab``, ``xb``, ``r+b``, ``w``, ...).

        Raises
        ------
        TypeError
            For a mode that is not a string (as ``open``).
        ValueError
            For an invalid mode, naming the URL.
        """
        if not isinstance(mode, str):
            raise TypeError(f"mode must be a str, not {type(mode).__name__} ({url})")
        if not mode:
            raise ValueError(f"invalid mode {mode!r} for {url}")
        chars = set(mode)
        kinds = chars & set("rwax")
        if (
            len(kinds) != 1
            or not chars <= set("rwaxbt+")
            or len(mode) != len(chars)
            or {"b", "t"} <= chars
        ):
            raise ValueError(
                f"invalid mode {mode!r} for {url}: use one of r, w, a, x, optionally with + and b/t"
            )
        kind = kinds.pop()
        plus = "+" in chars
        return cls(
            readable=kind == "r" or plus,
            writable=kind != "r" or plus,
            create=kind in "wax",
            truncate=kind == "w",
            exclusive=kind == "x",
            append=kind == "a",
            text="b" not in chars,
            mode=mode,
        )

    @classmethod
    def for_pwrite(cls) -> "OpenMode":
        """Write-only, create if missing, keep existing contents: what ``FileSystem.pwrite`` needs."""
        return cls(False, True, True, False, False, False, False, "pwrite")

    @property
    def binary_mode(self) -> str:
        """The equivalent binary mode string (``"w"`` -> ``"wb"``)."""
        if not set(self.mode) <= set("rwaxbt+"):
            return self.mode  # an internal mode with no open() spelling, e.g. "pwrite"
        return self.mode.replace("t", "") + ("b" if "b" not in self.mode else "")


def check_offset(offset: int, url: str, what: str = "offset") -> None:
    """Raise ``ValueError`` naming ``url`` unless ``offset`` is an integer in 0..MAX_OFFSET."""
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise TypeError(f"{what} must be an int, got {type(offset).__name__} for {url}")
    if offset < 0:
        raise ValueError(f"negative {what} {offset} for {url}")
    if offset > MAX_OFFSET:
        raise ValueError(f"{what} {offset} is past the largest file offset (2**63-1) for {url}")


def check_range(offset: int, length: int, url: str, length_name: str = "length") -> None:
    """Raise ``ValueError`` naming ``url`` unless ``offset`` and ``length`` are non-negative and
    ``offset + length <= MAX_OFFSET`` (every byte of the access is addressable)."""
    if type(offset) is int and type(length) is int and offset >= 0 and length >= 0 and offset + length <= MAX_OFFSET:
        return  # every positional call passes here: the common case in one test
    check_offset(offset, url)
    check_offset(length, url, length_name)
    if offset + length > MAX_OFFSET:
        raise ValueError(f"{length} bytes at offset {offset} end past the largest file offset (2**63-1) for {url}")


def text_codec(encoding: str, where: str) -> codecs.CodecInfo:
    """The codec of the text encoding ``encoding`` for reading or writing the text of ``where``
    (a URL or glob).

    Raises what Python raises for ``open(..., encoding=...)``, ``bytes.decode`` and
    ``pandas.read_csv``, but naming ``where`` (theirs name the encoding only):
    ``LookupError`` for an unknown name and for a codec that is not a text encoding (``hex``,
    ``rot13``: bytes to bytes or str to str), ``TypeError`` if ``encoding`` is not a ``str``.
    """
    if not isinstance(encoding, str):
        raise TypeError(f"encoding must be str, not {type(encoding).__name__} ({where})")
    try:
        info = codecs.lookup(encoding)
    except LookupError:
        raise LookupError(f"unknown encoding {encoding!r} for {where}") from None
    except ValueError as e:  # an embedded NUL, as open() says
        raise ValueError(f"{e} in encoding {encoding!r} for {where}") from None
    # The flag codecs.register gives bytes-to-bytes and str-to-str codecs (io and bytes.decode check it).
    if not getattr(info, "_is_text_encoding", True):
        raise LookupError(f"{encoding!r} is not a text encoding, for {where} (use codecs.open() to handle "
                          f"arbitrary codecs)")
    return info


#: The ``newline`` values of ``open`` in text mode.
_NEWLINES = (None, "", "\n", "\r", "\r\n")


def check_text_arguments(encoding, errors, newline, buffering: int, url: str, values: bool = True) -> None:
    """Raise what ``open`` raises for the text-mode arguments of a file ``url``, naming it:
    ``TypeError`` for an ``encoding``, ``errors`` or ``newline`` that is not a str or None,
    ``ValueError`` for one holding a NUL character and, with ``values``, ``LookupError`` for an
    ``encoding`` that is not a text encoding (:func:`text_codec`; ``"locale"`` is one here, as
    for ``open``) and ``ValueError`` for an illegal ``newline`` or ``buffering=0``.

    ``open`` checks the types before it opens the file and the values after: a typo in the
    encoding of ``open(path, "w", encoding=...)`` has emptied the file when it raises.
    :meth:`FileSystem.open` checks the values first for the modes that write, so it does not.
    """
    for name, value in (("encoding", encoding), ("errors", errors), ("newline", newline)):
        if value is None:
            continue
        if not isinstance(value, str):
            raise TypeError(f"open() argument {name!r} must be str or None, not {type(value).__name__} ({url})")
        if "\0" in value:
            raise ValueError(f"embedded null character in {name} {value!r} ({url})")
    if not values:
        return
    if newline not in _NEWLINES:
        raise ValueError(f"illegal newline value: {newline!r} ({url})")
    if buffering == 0:
        raise ValueError(f"can't have unbuffered text I/O on {url}")
    if encoding is not None and encoding != "locale":  # TextIOWrapper takes "locale" (Python 3.10+)
        text_codec(encoding, url)


def writable_bytes(buffer, url: str) -> memoryview:
    """``buffer`` as a writable memoryview of bytes, for a read into it; TypeError naming ``url``
    for anything else (an immutable ``bytes``, a non-buffer)."""
    if type(buffer) is memoryview and buffer.format == "B" and buffer.ndim == 1 and not buffer.readonly:
        return buffer  # as is: scatter reads pass every piece of every call through here
    try:
        view = memoryview(buffer)
    except TypeError:
        raise TypeError(f"read into {type(buffer).__name__}: expected a writable buffer (bytearray, numpy array, "
                        f"memoryview) for {url}") from None
    if view.readonly:
        raise TypeError(f"read into a read-only {type(buffer).__name__}: pass a bytearray, numpy array or "
                        f"writable memoryview for {url}")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def readable_bytes(data, url: str) -> memoryview:
    """``data`` as a memoryview of bytes, for a write from it; TypeError naming ``url`` for
    anything that is not a buffer (a str, an int)."""
    try:
        view = memoryview(data)
    except TypeError:
        raise TypeError(f"write of {type(data).__name__}: expected bytes or another buffer (bytearray, numpy "
                        f"array, memoryview) for {url}") from None
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def buffer_length(buffer, url: str) -> int:
    """Bytes in a writable or readable buffer; TypeError naming ``url`` for anything else."""
    try:
        return memoryview(buffer).nbytes
    except TypeError:
        raise TypeError(f"expected a bytes-like buffer, got {type(buffer).__name__} for {url}") from None


def scatter(views: list, preadinto, offset: int) -> int:
    """:meth:`RawFile.preadvinto` on any ``preadinto``: one read into a scratch buffer, then
    copies into ``views`` in turn; returns the bytes read."""
    if len(views) == 1:
        return preadinto(views[0], offset)
    scratch = memoryview(bytearray(sum(len(v) for v in views)))
    got = preadinto(scratch, offset)
    position = 0
    for view in views:
        if position >= got:
            break
        n = min(len(view), got - position)
        view[:n] = scratch[position:position + n]
        position += n
    return got


#: ``os.SEEK_DATA`` and ``os.SEEK_HOLE`` where the platform has them (Linux: 3 and 4).
SEEK_DATA_HOLE = {w for w in (getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)) if w is not None}


def seek_data_hole(offset: int, whence: int, size: int, url: str) -> int:
    """Where ``lseek(offset, SEEK_DATA | SEEK_HOLE)`` goes in a file of ``size`` bytes that keeps
    no record of its holes (Linux's generic answer, as FileIO gives it on such file systems):
    every byte is data and the only hole is the end. ENXIO at or past the end."""
    if offset < 0 or offset >= size:
        raise OSError(errno.ENXIO, f"{os.strerror(errno.ENXIO)}: offset {offset} (whence {whence})", url)
    return offset if whence == getattr(os, "SEEK_DATA", None) else size


class RawFile(io.RawIOBase):
    """Base class of unbuffered backend files that are not OS file descriptors.

    A subclass implements :meth:`preadinto`, :meth:`pwrite` (or :meth:`write` for streaming
    writers such as HDFS), :meth:`size` and, where supported, :meth:`truncate`; sequential
    ``readinto``/``write``/``seek`` are built on them here.
    """

    def __init__(self, url: str, mode: OpenMode):
        super().__init__()
        self.url = url
        self.name = url
        self.mode = mode.binary_mode
        self._open_mode = mode
        # In append mode the position starts at the end, as open() puts it, asked of the
        # subclass (size()) when first needed: its state is not set up yet here.
        self._position: int | None = None if mode.append else 0
        #: Held while a call reads, moves or advances the position (readinto, write, seek), so
        #: threads sharing an unbuffered handle each get their own bytes, as the kernel's file
        #: position lock gives FileIO: unlocked, two reads could return the same bytes and two
        #: writes land at one offset. Reentrant: readall calls readinto, write calls size().
        self._position_lock = threading.RLock()

    @property
    def _pos(self) -> int:
        if self._position is None:
            self._position = self.size()
        return self._position

    @_pos.setter
    def _pos(self, value: int) -> None:
        self._position = value

    # -- to implement -------------------------------------------------------------------
    def preadinto(self, buffer, offset: int) -> int:  # pragma: no cover - abstract
        """Read up to ``len(buffer)`` bytes at ``offset`` into ``buffer``; 0 at end of file."""
        raise io.UnsupportedOperation(f"positional read is not supported on {self.url}")

    def pwrite(self, data, offset: int) -> int:  # pragma: no cover - abstract
        """Write all of ``data`` at ``offset``; return the number of bytes written."""
        raise io.UnsupportedOperation(f"positional write is not supported on {self.url}")

    def size(self) -> int:  # pragma: no cover - abstract
        """Current size of the file in bytes."""
        raise io.UnsupportedOperation(f"size is not known for {self.url}")

    def truncate(self, size: int | None = None) -> int:
        """Refused where the backend cannot truncate (``capabilities.truncate`` false); on a
        closed file ValueError first, as FileIO (io's default skipped that check)."""
        self._check_open()
        raise io.UnsupportedOperation(f"truncate: {self.url} cannot be truncated (capabilities.truncate is False)")

    def sync(self) -> None:
        """Make written data durable (default: nothing beyond ``flush``)."""
        self._check_open()

    def map_range(self, offset: int, length: int) -> memoryview:
        """The ``length`` bytes at ``offset`` mapped into memory, where the backend's
        ``capabilities.memory_map`` holds (see :meth:`PosixRawFile.map_range
        <hpcbridge.fs.posix.PosixRawFile.map_range>`); elsewhere refused."""
        self._check_access(offset, length)
        raise io.UnsupportedOperation(f"map_range: {self.url} cannot be mapped into memory "
                                      f"(capabilities.memory_map is False); read it with preadinto")

    def read(self, size: int | None = -1) -> bytes:
        """Read up to ``size`` bytes at the position; all to the end for -1 or None (as FileIO)."""
        if size is None or size < 0:
            return self.readall()
        return super().read(size)

    def readall(self) -> bytes:
        """Read from the position to the end in one call (io's default reads 8 KiB at a time)."""
        self._check_open()
        if not self._open_mode.readable:
            raise io.UnsupportedOperation(f"read: {self.url} is open write-only (mode {self.mode!r})")
        # Read into the bytes returned (no second copy); no backend call at the end of the file.
        with self._position_lock:
            return read_new_bytes(max(0, self.size() - self._pos),
                                  lambda view: self.readinto(view) if len(view) else 0)

    def _check_access(self, offset: int, length: int) -> None:
        """What every positional call checks first: the handle is open, the range addressable."""
        self._check_open()
        check_range(offset, length, self.url)

    def preadvinto(self, buffers, offset: int) -> int:
        """Scatter read: fill ``buffers`` in turn from the consecutive bytes at ``offset``
        (``preadv(2)``); returns the byte count, short at end of file.

        Built here on one :meth:`preadinto` into a scratch buffer (one remote call, then copies);
        backends with a native scatter read (POSIX: ``os.preadv``) fill the buffers directly.
        """
        views = [writable_bytes(b, self.url) for b in buffers]
        return scatter(views, self.preadinto, offset)

    def pread(self, size: int, offset: int) -> bytes:
        """Read up to ``size`` bytes at ``offset`` (built on :meth:`preadinto`)."""
        self._check_open()
        check_range(offset, size, self.url, "size")
        return read_new_bytes(size, lambda view: self.preadinto(view, offset))  # no second copy

    # -- io.RawIOBase ----------------------------------------------------------------------
    def readable(self) -> bool:
        self._check_open()
        return self._open_mode.readable

    def writable(self) -> bool:
        self._check_open()
        return self._open_mode.writable

    def seekable(self) -> bool:
        self._check_open()
        return True

    def readinto(self, buffer) -> int:
        """Read at the current position into ``buffer``; returns the byte count (0 at EOF)."""
        self._check_open()
        if not self._open_mode.readable:
            raise io.UnsupportedOperation(f"read: {self.url} is open write-only (mode {self.mode!r})")
        with self._position_lock:
            n = self.preadinto(buffer, self._pos)
            self._pos += n
            return n

    def write(self, data) -> int:
        """Write ``data`` at the current position (at the end in append mode)."""
        self._check_open()
        if not self._open_mode.writable:
            raise io.UnsupportedOperation(f"write: {self.url} is open read-only (mode {self.mode!r})")
        with self._position_lock:
            if self._open_mode.append:
                self._pos = self.size()
            n = self.pwrite(data, self._pos)
            self._pos += n
            return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        with self._position_lock:
            return self._seek_locked(offset, whence)

    def _seek_locked(self, offset: int, whence: int) -> int:
        self._check_open()
        offset, whence = operator.index(offset), operator.index(whence)  # as FileIO: no floats
        if whence == io.SEEK_SET:
            target = offset
        elif whence == io.SEEK_CUR:
            target = self._pos + offset
        elif whence == io.SEEK_END:
            target = self.size() + offset
        elif whence in SEEK_DATA_HOLE:
            target = seek_data_hole(offset, whence, self.size(), self.url)
        else:
            raise ValueError(f"invalid whence {whence} for {self.url}")
        if target < 0:
            raise ValueError(f"negative seek position {target} for {self.url}")
        if target > MAX_OFFSET:
            raise ValueError(f"seek position {target} is past the largest file offset (2**63-1) for {self.url}")
        self._pos = target
        return target

    def tell(self) -> int:
        self._check_open()
        return self._pos

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"I/O operation on closed file {self.url}")


class _Positional:
    """Positional I/O and URL-naming errors, mixed into the io buffering classes."""

    url: str

    def __init__(self, raw, buffer_size: int = DEFAULT_BUFFER_SIZE):
        super().__init__(raw, buffer_size)
        #: URL of the file, for messages.
        self.url = raw.url

    @property
    def size(self) -> int:
        """The file's current size in bytes (fsspec's file objects have it: ``read_block``)."""
        if self.writable():
            self.flush()
        return self.raw.size()

    def pread(self, size: int, offset: int) -> bytes:
        """Read up to ``size`` bytes at ``offset`` without moving the file position."""
        self._check_open()
        check_range(offset, size, self.url, "size")
        if not self.readable():
            raise io.UnsupportedOperation(f"pread: {self.url} is open write-only")
        self._flush_writes()
        return self.raw.pread(size, offset)

    def preadinto(self, buffer, offset: int) -> int:
        """Read into ``buffer`` at ``offset`` (zero-copy); returns the byte count, 0 at EOF."""
        self._check_open()  # the raw file checks the buffer and the range (every backend's does)
        if not self.readable():
            raise io.UnsupportedOperation(f"preadinto: {self.url} is open write-only")
        self._flush_writes()
        return self.raw.preadinto(buffer, offset)

    def preadvinto(self, buffers, offset: int) -> int:
        """Scatter read of consecutive bytes at ``offset`` into ``buffers`` (see RawFile)."""
        self._check_open()
        views = [writable_bytes(b, self.url) for b in buffers]
        check_range(offset, sum(len(v) for v in views), self.url)
        if not self.readable():
            raise io.UnsupportedOperation(f"preadvinto: {self.url} is open write-only")
        self._flush_writes()
        return self.raw.preadvinto(views, offset)

    def map_range(self, offset: int, length: int) -> memoryview:
        """The ``length`` bytes at ``offset`` mapped into memory (see the raw file's ``map_range``)."""
        self._check_open()
        if not self.readable():
            raise io.UnsupportedOperation(f"map_range: {self.url} is open write-only")
        self._flush_writes()
        return self.raw.map_range(offset, length)

    def pwrite(self, data, offset: int) -> int:
        """Write all of ``data`` at ``offset`` without moving the file position."""
        self._check_open()
        check_range(offset, buffer_length(data, self.url), self.url)
        if not self.writable():
            raise io.UnsupportedOperation(f"pwrite: {self.url} is open read-only (mode {self.mode!r})")
        if "a" in self.mode:
            raise io.UnsupportedOperation(
                f"pwrite: {self.url} is open in append mode, where every write goes to the end"
            )
        self._flush_writes()
        n = self.raw.pwrite(data, offset)
        if self.readable():
            # The read buffer may hold the bytes just overwritten: drop it. BufferedRandom.flush
            # discards the read buffer and rewinds the raw file to the logical position in one
            # call under io's lock. (A tell, a SEEK_END seek and a seek back, as before, put
            # the position back to where it was before another thread's read: that thread then
            # read the same bytes again.)
            self.flush()
        return n

    def sync(self) -> None:
        """Flush buffered writes and make them durable (fsync on POSIX, hsync on HDFS)."""
        self._check_open()
        self._flush_writes()
        self.raw.sync()

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"I/O operation on closed file {self.url}")

    def _flush_writes(self) -> None:
        if self.writable():
            self.flush()

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.mode
        return f"<hpcbridge {type(self).__name__} {self.url} {state}>"


class BufferedReader(_Positional, io.BufferedReader):
    """A read-only buffered file of any backend (``io.BufferedReader`` plus positional reads)."""

    def preadinto(self, buffer, offset: int) -> int:
        """Read into ``buffer`` at ``offset`` (zero-copy); returns the byte count, 0 at EOF.

        Read-only, so there are no buffered writes to flush first: straight to the raw file,
        which checks the buffer and the range (small positional reads are a hot path)."""
        if self.closed:
            raise ValueError(f"I/O operation on closed file {self.url}")
        return self.raw.preadinto(buffer, offset)

    def preadvinto(self, buffers, offset: int) -> int:
        """Scatter read of consecutive bytes at ``offset`` into ``buffers`` (see RawFile); as
        :meth:`preadinto`, straight to the raw file, which checks them (a PLFS run of a large
        read passes hundreds of buffers)."""
        if self.closed:
            raise ValueError(f"I/O operation on closed file {self.url}")
        return self.raw.preadvinto(buffers, offset)

    def write(self, data) -> int:
        """Refused: the file is read-only."""
        raise io.UnsupportedOperation(f"write: {self.url} is open read-only (mode {self.mode!r})")


class BufferedWriter(_Positional, io.BufferedWriter):
    """A write-only buffered file of any backend (``io.BufferedWriter`` plus positional writes)."""

    def read(self, size: int = -1) -> bytes:
        """Refused: the file is write-only."""
        raise io.UnsupportedOperation(f"read: {self.url} is open write-only (mode {self.mode!r})")

    def readinto(self, buffer) -> int:
        """Refused: the file is write-only."""
        raise io.UnsupportedOperation(f"readinto: {self.url} is open write-only (mode {self.mode!r})")


class BufferedRandom(_Positional, io.BufferedRandom):
    """A read-write buffered file of any backend (``r+b``, ``w+b``, ``a+b``, ``x+b``)."""


def wrap_raw(raw, mode: OpenMode, buffering: int = -1, encoding=None, errors=None, newline=None,
             default_buffer_size: int = DEFAULT_BUFFER_SIZE):
    """Wrap a raw backend file in buffering (and text decoding for text modes), like ``open``.

    ``buffering``: 0 for the raw file, -1 for ``default_buffer_size``, 1 for line buffering in
    text mode (``default_buffer_size`` in binary mode, as ``open`` does), else the size.
    """
    if buffering == 0:
        if mode.text:
            raise ValueError(f"can't have unbuffered text I/O on {raw.url}")
        if mode.append:
            # Fix the position at the end *now*, as open() does (the buffered classes ask tell()
            # when they wrap the raw file): a RawFile resolves it lazily, and a truncate or
            # another writer before the first tell() moved it to the new end.
            raw.tell()
        return raw
    # FileSystem.open has checked ``buffering`` (an int, negative ones made -1) before opening.
    size = default_buffer_size if buffering in (-1, 1) else buffering
    if mode.readable and mode.writable:
        buffered = BufferedRandom(raw, size)
    elif mode.writable:
        buffered = BufferedWriter(raw, size)
    else:
        buffered = BufferedReader(raw, size)
    if mode.text:
        text = io.TextIOWrapper(buffered, encoding=encoding or "utf-8", errors=errors, newline=newline,
                                line_buffering=buffering == 1)
        text.mode = mode.mode  # as open() sets it
        return text
    return buffered
