"""``hpcbridge.mpi.File``: an mpi4py-like MPI-IO file on any hpcbridge backend.

The calls mirror ``mpi4py.MPI.File`` (lower-case, Pythonic names): ``set_view``, independent
``write_at``/``read_at``/``write``/``read``, collective ``write_at_all``/``read_at_all``/
``write_all``/``read_all``, ``sync``, ``close``. Collective calls go through hpcbridge's two-phase
aggregation (:mod:`hpcbridge.mpi.twophase`), which works on every backend with positional reads,
and for writing on POSIX mounts and PLFS containers (``plfs+file://``, ``plfs+hdfs://``).
"""

from __future__ import annotations

import io

import numpy as np

from .aggregators import choose_aggregators, node_map
from .hints import Hints, parse_hints
from .target import open_target, parse_amode
from .twophase import Exchanger
from .windowio import independent_read, independent_write
from .view import FileView

__all__ = ["File", "SEEK_SET", "SEEK_CUR", "SEEK_END"]

SEEK_SET, SEEK_CUR, SEEK_END = io.SEEK_SET, io.SEEK_CUR, io.SEEK_END


def _read_buffer(buf) -> memoryview:
    """A flat byte view of ``buf`` without a copy where possible (non-contiguous arrays are copied)."""
    try:
        view = memoryview(buf)
    except TypeError:
        raise TypeError(f"expected a buffer (bytes, bytearray, memoryview, numpy array), got {type(buf).__name__}") \
            from None
    if not view.c_contiguous:
        view = memoryview(np.ascontiguousarray(np.asarray(buf)))  # MPI would pack it too: one copy
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def _write_target_buffer(buf) -> memoryview:
    """A writable flat byte view of ``buf`` (must be C-contiguous: data land in place)."""
    try:
        view = memoryview(buf)
    except TypeError:
        raise TypeError(f"expected a writable buffer (bytearray, memoryview, numpy array), got {type(buf).__name__}") \
            from None
    if view.readonly:
        raise TypeError(f"cannot read into a read-only buffer ({type(buf).__name__})")
    if not view.c_contiguous:
        raise ValueError("read buffers must be C-contiguous (use numpy.ascontiguousarray)")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


class File:
    """An open file shared by the ranks of a communicator.

    Create one with :meth:`File.open`. Offsets of ``*_at`` calls count elementary types of the
    current view (bytes by default), as in MPI. Collective calls must be made by every rank of
    the communicator, in the same order.

    >>> from mpi4py import MPI                                            # doctest: +SKIP
    >>> f = File.open(MPI.COMM_WORLD, "file:///scratch/ckpt", "w",        # doctest: +SKIP
    ...               hints={"cb_buffer_size": "16m"})
    >>> f.write_at_all(rank * block.nbytes, block)                        # doctest: +SKIP
    >>> f.close()                                                         # doctest: +SKIP
    """

    def __init__(self, comm, target, hints: Hints, aggregators: np.ndarray):
        self.comm = comm
        self._target = target
        self.hints = hints
        self.url = target.url
        self.mode = target.mode
        self._exchanger = Exchanger(comm, target, aggregators, hints)
        self._view = FileView()
        self._position = 0  # individual file pointer, in etypes of the view
        self._closed = False

    # -- opening and closing ------------------------------------------------------------------
    @classmethod
    def open(cls, comm, url, mode="r", hints=None, **options) -> "File":
        """Collective: open ``url`` on every rank of ``comm``.

        Parameters
        ----------
        comm:
            An mpi4py intracommunicator.
        url:
            Any hpcbridge URL: ``file:///...`` (POSIX mounts), ``plfs+file://...``,
            ``plfs+hdfs://nn:port/...`` (writes), ``hdfs://...`` (reads).
        mode:
            ``"r"``, ``"r+"``, ``"w"`` (create, truncate), ``"w+"``, ``"x"``, ``"x+"``, or an MPI
            amode such as ``MPI.MODE_WRONLY | MPI.MODE_CREATE`` (create without truncating).
        hints:
            Collective-buffering hints (mapping or ``MPI.Info``): ``cb_buffer_size``, ``cb_nodes``,
            ``cb_config_list``, ``striping_unit``, ``cb_write``, ``cb_read``, ``romio_ds_write``,
            ``romio_ds_read``, ``direct_write``, ``cb_write_behind``. Unknown names are an error.
        **options:
            Options of the backend (e.g. ``webhdfs=`` for HDFS).

        Raises
        ------
        ValueError
            Bad mode or hints.
        io.UnsupportedOperation
            Writing to a backend where ranks cannot share a file (HDFS: use ``plfs+hdfs://``).
        FileNotFoundError, FileExistsError, PermissionError
            As for any open, on every rank.
        """
        url_text = str(url)
        amode = parse_amode(mode, url_text)
        parsed = parse_hints(hints)
        # Ranks act on the hints without asking each other (cb_write=disable skips every
        # exchange), so they must agree: refuse differing hints on every rank rather than hang.
        everyone = comm.allgather(parsed.as_dict())
        for rank, theirs in enumerate(everyone):
            if theirs != everyone[0]:
                raise ValueError(f"{url_text}: hints must be the same on every rank; rank 0 passed {everyone[0]}, "
                                 f"rank {rank} passed {theirs}")
        nodes = node_map(comm)
        aggregators = choose_aggregators(nodes, parsed)
        target = open_target(comm, url, amode, **options)
        return cls(comm, target, parsed, aggregators)

    def close(self) -> None:
        """Collective: finish pending I/O and close (PLFS: write the job's metadata)."""
        if self._closed:
            return
        self._closed = True
        error = None
        try:
            self._exchanger.close()
        except OSError as exc:
            error = exc
        self._target.close()
        self._exchanger._raise_collectively(error, "close")
        self.comm.Barrier()

    def __enter__(self) -> "File":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return self._closed

    def _check(self, writing: bool | None = None) -> None:
        if self._closed:
            raise ValueError(f"I/O operation on closed file {self.url}")
        if writing is True and not self.mode.write:
            raise io.UnsupportedOperation(f"write: {self.url} is open read-only (mode {self.mode.name})")
        if writing is False and not self.mode.read:
            raise io.UnsupportedOperation(f"read: {self.url} is open write-only (mode {self.mode.name})")

    # -- views --------------------------------------------------------------------------------
    def set_view(self, disp: int = 0, etype=None, filetype=None, extent: int | None = None) -> None:
        """Collective: set this rank's view and reset its file pointer.

        ``filetype`` is an MPI datatype (subarray, vector, indexed, struct, resized...; decoded
        with ``Get_envelope``/``Get_contents``) or explicit ``(offset, length)`` byte extents
        (an N×2 array, or a pair of arrays) tiled every ``extent`` bytes (default: their end).
        ``etype`` (an MPI datatype or a size in bytes) is the unit of offsets.
        """
        self._check()
        self._view = FileView.build(disp, etype, filetype, extent)
        self._position = 0
        self.comm.Barrier()

    def get_view(self) -> FileView:
        """The current view."""
        return self._view

    @property
    def last_plan(self):
        """What the last collective call did: aggregators, file domains, rounds (a CollectivePlan)."""
        return self._exchanger.last_plan

    @property
    def aggregators(self) -> list[int]:
        """Ranks that aggregate collective I/O for this file."""
        return self._exchanger.aggregators.tolist()

    # -- independent --------------------------------------------------------------------------
    def write_at(self, offset: int, buf) -> int:
        """Write ``buf`` at view offset ``offset`` (etypes) without coordination; returns bytes written."""
        self._check(writing=True)
        self._exchanger.drain()  # after earlier write-behind, in call order
        data = _read_buffer(buf)
        offsets, lengths = self._view.extents(offset, len(data))
        independent_write(self._target, data, offsets, lengths, self._exchanger.direct)
        return len(data)

    def read_at(self, offset: int, buf) -> int:
        """Fill ``buf`` from view offset ``offset``; returns the bytes that lay before end of file."""
        self._check(writing=False)
        self._exchanger.drain()
        data = _write_target_buffer(buf)
        offsets, lengths = self._view.extents(offset, len(data))
        independent_read(self._target, data, offsets, lengths)
        return self._count_before_eof(offsets, lengths)

    def write(self, buf) -> int:
        """Independent write at the individual file pointer, which advances."""
        n = self.write_at(self._position, buf)
        self._position += n // self._view.etype_size
        return n

    def read(self, buf) -> int:
        """Independent read at the individual file pointer, which advances."""
        n = self.read_at(self._position, buf)
        self._position += memoryview(buf).nbytes // self._view.etype_size
        return n

    # -- collective ---------------------------------------------------------------------------
    def write_at_all(self, offset: int, buf) -> int:
        """Collective write of ``buf`` at view offset ``offset``, aggregated in two phases."""
        self._check(writing=True)
        data = _read_buffer(buf)
        offsets, lengths = self._view.extents(offset, len(data))
        return self._exchanger.write(data, offsets, lengths)

    def read_at_all(self, offset: int, buf) -> int:
        """Collective read into ``buf`` from view offset ``offset``; returns bytes before end of file."""
        self._check(writing=False)
        data = _write_target_buffer(buf)
        offsets, lengths = self._view.extents(offset, len(data))
        self._exchanger.read(data, offsets, lengths)
        return self._count_before_eof(offsets, lengths)

    def write_all(self, buf) -> int:
        """Collective write at the individual file pointer, which advances."""
        n = self.write_at_all(self._position, buf)
        self._position += n // self._view.etype_size
        return n

    def read_all(self, buf) -> int:
        """Collective read at the individual file pointer, which advances."""
        n = self.read_at_all(self._position, buf)
        self._position += memoryview(buf).nbytes // self._view.etype_size
        return n

    # -- pointer, size, sync ------------------------------------------------------------------
    def seek(self, offset: int, whence: int = SEEK_SET) -> int:
        """Move the individual file pointer (etypes of the view); returns the new position."""
        self._check()
        if whence == SEEK_SET:
            position = offset
        elif whence == SEEK_CUR:
            position = self._position + offset
        elif whence == SEEK_END:
            if not self._view.contiguous:
                raise io.UnsupportedOperation(f"seek from the end of {self.url} needs the default byte view")
            position = (self.get_size() - self._view.disp) // self._view.etype_size + offset
        else:
            raise ValueError(f"whence must be SEEK_SET, SEEK_CUR or SEEK_END, got {whence!r}")
        if position < 0:
            raise ValueError(f"seek to a negative position ({position}) in {self.url}")
        self._position = position
        return position

    def get_position(self) -> int:
        """The individual file pointer, in etypes."""
        return self._position

    def get_size(self) -> int:
        """Current file size in bytes (PLFS write handles: the end of this rank's writes)."""
        self._check()
        self._exchanger.drain()
        return self._target.size()

    def sync(self) -> None:
        """Collective: make every rank's writes durable and visible (fsync / hsync)."""
        self._check()
        error = None
        try:
            self._exchanger.flush_staged()
            self._exchanger.drain()
            self._target.sync()
        except OSError as exc:
            error = exc
        self._exchanger._raise_collectively(error, "sync")
        self.comm.Barrier()

    def _count_before_eof(self, offsets: np.ndarray, lengths: np.ndarray) -> int:
        if offsets.size == 0:
            return 0
        self._exchanger.drain()
        size = self._target.size()
        return int(np.clip(np.minimum(offsets + lengths, size) - offsets, 0, None).sum())

    def __repr__(self) -> str:
        state = "closed" if self._closed else self.mode.name
        return f"<hpcbridge.mpi.File {self.url} {state} ranks={self.comm.size} aggregators={self.aggregators}>"
