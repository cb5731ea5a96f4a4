"""``hpcbridge.mpi.File``: mpi4py's ``MPI.File`` on any hpcbridge backend.

Every public method of ``mpi4py.MPI.File`` exists here under its MPI name (``Write_at_all``,
``Set_view``, ``Iread_at``, ``Seek_shared``...) and under the same name in lower case
(``write_at_all``...), which is the same function: same arguments, defaults and results (the
data calls also return the byte count they report in ``status``; the split collectives'
``*_end`` return None, as mpi4py's do). ``File.open``/``File.Open``
take an hpcbridge URL (or a local path), a mode string or an MPI amode, and hints as a mapping
or an ``MPI.Info``. Collective calls go through hpcbridge's two-phase aggregation
(:mod:`hpcbridge.mpi.twophase`), which works on every backend with positional reads, and for
writing on POSIX mounts and PLFS containers (``plfs+file://``, ``plfs+hdfs://``).

Errors of collective calls are collective: each rank checks its arguments, the ranks agree
with one small reduction before any data moves, and if any rank's arguments are bad every rank
raises that rank's exception (so no rank waits for a partner that gave up). ``Write_at_all``
carries the check in its plan's agreement instead (one synchronisation per call): a rank
writing its own large pieces directly may have written them when it learns of another rank's
bad argument. What hpcbridge
cannot do faithfully raises ``NotImplementedError`` naming the MPI call; the differential tests
(tests/mpi/test_differential_mpi.py) compare every call with Open MPI's ``MPI.File``.
"""

from __future__ import annotations

import io
import os

import numpy as np

from .agree import agree as _agree
from .aggregators import choose_aggregators, node_map
from .errors import mpi_errors
from .hints import Hints, parse_hints
from .messages import message
from .target import open_target, parse_amode
from .twophase import Exchanger
from .windowio import independent_read, independent_write
from .view import FileView

__all__ = ["File", "SEEK_SET", "SEEK_CUR", "SEEK_END", "MPI_FILE_METHODS"]

SEEK_SET, SEEK_CUR, SEEK_END = io.SEEK_SET, io.SEEK_CUR, io.SEEK_END

#: MPI's seek constants (600, 602, 604 in Open MPI) and Python's (0, 1, 2) mean the same here.
_MPI_WHENCE_NAMES = ("SEEK_SET", "SEEK_CUR", "SEEK_END")


def _whence(whence) -> int:
    if isinstance(whence, (int, np.integer)) and not isinstance(whence, bool):
        if int(whence) in (SEEK_SET, SEEK_CUR, SEEK_END):
            return int(whence)
        from mpi4py import MPI

        for value, name in zip((SEEK_SET, SEEK_CUR, SEEK_END), _MPI_WHENCE_NAMES):
            if int(whence) == getattr(MPI, name):
                return value
    raise ValueError(f"whence must be MPI.SEEK_SET, MPI.SEEK_CUR or MPI.SEEK_END (or io.SEEK_*), got {whence!r}")


def _offset(offset, what: str = "offset") -> int:
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
        raise TypeError(f"{what} must be an integer, got {type(offset).__name__}")
    if offset < 0:
        raise ValueError(f"{what} must be non-negative, got {offset}")
    return int(offset)


def _set_status(status, nbytes: int) -> None:
    if status is not None:
        from mpi4py import MPI

        status.Set_elements(MPI.BYTE, int(nbytes))
        status.Set_cancelled(False)


def _completed_request(nbytes: int):
    """An ``MPI.Grequest`` already complete, whose status counts ``nbytes`` bytes: the request
    of a non-blocking call done at once. It works with ``Wait``, ``Test``, ``Waitall``..."""
    from mpi4py import MPI

    def query(status):
        status.Set_elements(MPI.BYTE, int(nbytes))
        status.Set_cancelled(False)
        status.source = MPI.UNDEFINED
        status.tag = MPI.UNDEFINED

    request = MPI.Grequest.Start(query)
    request.Complete()
    return request


def _not_implemented(call: str, why: str):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"{call} is not implemented by hpcbridge.mpi.File: {why}")

    method.__name__ = call.replace("MPI_File_", "")
    method.__doc__ = f"Not available: raises NotImplementedError ({why})."
    return method


class File:
    """An open file shared by the ranks of a communicator.

    Create one with :meth:`File.open` (alias :meth:`File.Open`). Offsets count elementary types
    of the current view (bytes by default), as in MPI. Collective calls must be made by every
    rank of the communicator, in the same order.

    >>> from mpi4py import MPI                                            # doctest: +SKIP
    >>> f = File.open(MPI.COMM_WORLD, "file:///scratch/ckpt", "w",        # doctest: +SKIP
    ...               hints={"cb_buffer_size": "16m"})
    >>> f.write_at_all(rank * block.nbytes, block)                        # doctest: +SKIP
    >>> f.close()                                                         # doctest: +SKIP
    """

    def __init__(self, comm, target, hints: Hints, aggregators: np.ndarray, amode: int | None = None):
        self.comm = comm
        self._target = target
        self.hints = hints
        self.url = target.url
        self.mode = target.mode
        self._amode = amode
        self._exchanger = Exchanger(comm, target, aggregators, hints)
        self._view = FileView()
        self._view_types = None  # (etype, filetype) as given to Set_view (duplicates of derived types)
        self._position = 0  # individual file pointer, in etypes of the view
        self._split = None  # the split collective under way: (name, byte count)
        self._closed = False
        self._shared = _SharedPointer(comm)
        self._plfs = target.fs.backend_name.lower().startswith("plfs") and target.mode.write

    # -- opening and closing ------------------------------------------------------------------
    @classmethod
    def Open(cls, comm, filename, amode="r", info=None, *, hints=None, mode=None, **options) -> "File":
        """Collective: open ``filename`` on every rank of ``comm``.

        Parameters
        ----------
        comm:
            An mpi4py intracommunicator.
        filename:
            Any hpcbridge URL: ``file:///...`` or a local path (POSIX mounts), ``plfs+file://...``,
            ``plfs+hdfs://nn:port/...`` (writes), ``hdfs://...`` (reads).
        amode:
            ``"r"``, ``"r+"``, ``"w"`` (create, truncate), ``"w+"``, ``"x"``, ``"x+"``, or an MPI
            amode such as ``MPI.MODE_WRONLY | MPI.MODE_CREATE`` (create without truncating).
            (``mode=`` is accepted as another name.)
        info, hints:
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
        if mode is not None:
            amode = mode
        if hints is not None and info is not None:
            raise TypeError("pass the hints once: info= or hints=")
        hints = info if hints is None else hints
        url_text = os.fspath(filename) if not isinstance(filename, bytes) else os.fsdecode(filename)
        if "://" not in url_text:
            url_text = os.path.abspath(url_text)
        try:
            access = parse_amode(amode, url_text)
            parsed = parse_hints(_info_items(hints))
            error = None
        except Exception as exc:
            access = parsed = None
            error = exc
        _agree(comm, error)
        # Ranks act on the hints without asking each other (cb_write=disable skips every
        # exchange), so they must agree: refuse differing hints on every rank rather than hang.
        everyone = comm.allgather(parsed.as_dict())
        for rank, theirs in enumerate(everyone):
            if theirs != everyone[0]:
                raise ValueError(f"{url_text}: hints must be the same on every rank; rank 0 passed {everyone[0]}, "
                                 f"rank {rank} passed {theirs}")
        nodes = node_map(comm)
        aggregators = choose_aggregators(nodes, parsed)
        target = open_target(comm, url_text, access, **options)
        f = cls(comm, target, parsed, aggregators, amode if isinstance(amode, int) else None)
        if f._has_amode("MODE_APPEND"):  # every file pointer starts at the end of the file
            end = comm.bcast(target.size() if comm.rank == 0 else None, root=0)
            f._position = end
            f._shared.set_collective(end, f.url)
        return f

    open = Open

    @classmethod
    def Delete(cls, filename, info=None, **options) -> None:
        """Delete ``filename`` (an hpcbridge URL or a local path). Not collective, as in MPI."""
        from ..fs.api import url_to_fs

        url_text = os.fspath(filename)
        fs, path = url_to_fs(url_text if "://" in url_text else os.path.abspath(url_text), **options)
        if not fs.exists(path):
            import errno

            raise FileNotFoundError(errno.ENOENT, f"no such file: {fs.url(path)}", fs.url(path))
        fs.rm(path)

    delete = Delete

    def Close(self) -> None:
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
        self._shared.free()
        self._free_view_types()
        self._exchanger._raise_collectively(error, "close")
        self.comm.Barrier()
        if self._has_amode("MODE_DELETE_ON_CLOSE"):
            removed = None
            if self.comm.rank == 0:
                try:
                    self._target.fs.rm(self._target.path)
                except OSError as exc:
                    removed = exc
            self._exchanger._raise_collectively(removed, "close (MODE_DELETE_ON_CLOSE)")

    def _has_amode(self, name: str) -> bool:
        if self._amode is None:
            return False
        from mpi4py import MPI

        return bool(self._amode & getattr(MPI, name))

    close = Close

    def free(self) -> None:
        """As mpi4py's ``File.free``: close the file if it is open."""
        self.Close()

    def __enter__(self) -> "File":
        return self

    def __exit__(self, *exc) -> None:
        self.Close()

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

    def _collective(self, prepare):
        """Run ``prepare()`` (this rank's argument checks) and agree with the other ranks before
        anything is exchanged: if any rank failed, every rank raises that rank's exception."""
        try:
            result, error = prepare(), None
        except Exception as exc:
            result, error = None, exc
        _agree(self.comm, error)
        return result

    # -- views --------------------------------------------------------------------------------
    def Set_view(self, disp: int = 0, etype=None, filetype=None, datarep: str = "native", info=None, *,
                 extent: int | None = None) -> None:
        """Collective: set this rank's view and reset the individual and shared file pointers.

        As ``MPI_File_set_view``: ``etype`` defaults to ``MPI.BYTE`` and ``filetype`` to the
        etype. ``filetype`` is an MPI datatype (subarray, vector, indexed, struct, resized...;
        decoded with ``Get_envelope``/``Get_contents``) or, as an hpcbridge extension, explicit
        ``(offset, length)`` byte extents (an N×2 array, or a pair of arrays) tiled every
        ``extent`` bytes (default: their end). ``etype`` may also be a size in bytes. Only the
        ``"native"`` data representation exists (``datarep=None`` is it, as in mpi4py).
        """
        def prepare():
            self._check()
            if datarep not in ("native", None):  # mpi4py passes None as "native"
                raise NotImplementedError(f"MPI_File_set_view with datarep {datarep!r}: only 'native' is "
                                          "implemented")
            if isinstance(disp, bool) or not isinstance(disp, (int, np.integer)):
                raise TypeError(f"view displacement must be an integer, got {type(disp).__name__}")
            if disp < 0:
                raise ValueError(f"view displacement must be non-negative, got {disp}")
            if etype is not None and not isinstance(etype, (int, np.integer)) and not hasattr(etype, "Get_size"):
                raise TypeError(f"etype must be an MPI datatype or a size in bytes, got {type(etype).__name__}")
            ftype = filetype
            if ftype is None and etype is not None and hasattr(etype, "Get_envelope"):
                ftype = etype  # MPI: the filetype defaults to the etype
            if ftype is not None and hasattr(ftype, "Get_envelope") and hasattr(etype, "Get_size") \
                    and ftype.Get_size() % max(1, etype.Get_size()):
                raise ValueError(f"filetype size {ftype.Get_size()} is not a multiple of the etype size "
                                 f"{etype.Get_size()}")
            return FileView.build(int(disp), etype, ftype, extent)

        view = self._collective(prepare)
        self.drain_for_view()
        self._free_view_types()
        self._view = view
        self._view_types = (_dup(etype), _dup(filetype) if filetype is not None else None)
        self._position = 0
        self._shared.reset()
        if info is not None:
            self._merge_info(info)
        self.comm.Barrier()

    set_view = Set_view

    def drain_for_view(self) -> None:
        """Pending writes of the old view reach the file before a new view is used."""
        self._exchanger.drain()

    def _free_view_types(self) -> None:
        if self._view_types:
            for t in self._view_types:
                if t is not None and hasattr(t, "Free") and not getattr(t, "is_predefined", True):
                    t.Free()
        self._view_types = None

    def Get_view(self):
        """``(disp, etype, filetype, datarep)`` as ``MPI_File_get_view``: the datatypes of the last
        :meth:`Set_view` (``MPI.BYTE`` for the default view; explicit extents as given). Derived
        datatypes are new duplicates, which the caller frees, as in MPI."""
        from mpi4py import MPI

        self._check()
        etype, filetype = self._view_types or (None, None)
        # MPI_File_get_view returns new handles of derived types: a caller freeing them (as MPI
        # programs do) freed the view's own copies, and the next Get_view, Set_view or Close failed.
        if etype is None or isinstance(etype, (int, np.integer)):
            etype = MPI.BYTE if etype in (None, 1) else MPI.BYTE.Create_contiguous(int(etype)).Commit()
        else:
            etype = _dup(etype)
        filetype = _dup(etype if filetype is None else filetype)  # its own handle, also as the etype
        return self._view.disp, etype, filetype, "native"

    get_view = Get_view

    @property
    def view(self) -> FileView:
        """The current view as hpcbridge decoded it (a :class:`FileView`)."""
        return self._view

    @property
    def last_plan(self):
        """What the last collective call did: aggregators, file domains, rounds (a CollectivePlan)."""
        return self._exchanger.last_plan

    @property
    def aggregators(self) -> list[int]:
        """Ranks that aggregate collective I/O for this file."""
        return self._exchanger.aggregators.tolist()

    def Get_byte_offset(self, offset: int) -> int:
        """The absolute byte position in the file of view offset ``offset`` (etypes)."""
        self._check()
        offset = _offset(offset)
        offsets, _ = self._view.extents(offset, self._view.etype_size)
        return int(offsets[0])

    get_byte_offset = Get_byte_offset

    def Get_type_extent(self, datatype) -> int:
        """The extent of ``datatype`` in the file (the ``native`` representation: its extent)."""
        self._check()
        return int(datatype.Get_extent()[1])

    get_type_extent = Get_type_extent

    # -- independent --------------------------------------------------------------------------
    def _independent_write(self, offset: int, msg) -> int:
        self._exchanger.drain()  # after earlier staged or in-flight writes, in call order
        offsets, lengths = self._view.extents(offset, msg.nbytes)
        independent_write(self._target, msg.data, offsets, lengths, self._exchanger.direct)
        return msg.nbytes

    def _independent_read(self, offset: int, msg) -> int:
        self._exchanger.drain()
        offsets, lengths = self._view.extents(offset, msg.nbytes)
        independent_read(self._target, msg.data, offsets, lengths, zero_past_end=False)
        count = self._count_before_eof(offsets, lengths)
        msg.finish(count)
        return count

    def _prepare_write(self, offset, buf):
        self._check(writing=True)
        offset = _offset(offset)
        msg = message(buf, writable=False)
        self._view.check(offset, msg.nbytes)  # whole etypes
        return offset, msg

    def _prepare_read(self, offset, buf):
        self._check(writing=False)
        offset = _offset(offset)
        msg = message(buf, writable=True)
        self._view.check(offset, msg.nbytes)
        return offset, msg

    def Write_at(self, offset: int, buf, status=None) -> int:
        """Write ``buf`` at view offset ``offset`` (etypes) without coordination; returns bytes written."""
        offset, msg = self._prepare_write(offset, buf)
        n = self._independent_write(offset, msg)
        _set_status(status, n)
        return n

    def Read_at(self, offset: int, buf, status=None) -> int:
        """Fill ``buf`` from view offset ``offset``; returns the bytes that lay before end of file
        (the rest of ``buf`` reads as zeros)."""
        offset, msg = self._prepare_read(offset, buf)
        n = self._independent_read(offset, msg)
        _set_status(status, n)
        return n

    def Write(self, buf, status=None) -> int:
        """Independent write at the individual file pointer, which advances past the data."""
        n = self.Write_at(self._position, buf, status)
        self._position += n // self._view.etype_size
        return n

    def Read(self, buf, status=None) -> int:
        """Independent read at the individual file pointer, which advances by the data asked
        for (as in Open MPI, also when the read stops short at end of file)."""
        asked = _asked(buf)
        n = self.Read_at(self._position, buf, status)
        self._position += asked // self._view.etype_size
        return n

    # -- collective ---------------------------------------------------------------------------
    def Write_at_all(self, offset: int, buf, status=None) -> int:
        """Collective write of ``buf`` at view offset ``offset``, aggregated in two phases."""
        if not self._plfs and self._exchanger.agrees_in_plan:
            # One synchronisation per call, not two: the ranks' argument checks travel with the
            # plan's agreement (per-object checkpoints spent 40% of their time in the separate
            # agreement, 4 ranks on 2 cores, py-spy).
            try:
                (offset, msg), error = self._prepare_write(offset, buf), None
                offsets, lengths = self._view.extents(offset, msg.nbytes)
                data = msg.data
            except Exception as exc:
                error, data = exc, memoryview(b"")
                offsets = lengths = np.empty(0, dtype=np.int64)
            n = self._exchanger.write(data, offsets, lengths, arg_error=error)
            _set_status(status, n)
            return n
        offset, msg = self._collective(lambda: self._prepare_write(offset, buf))
        offsets, lengths = self._view.extents(offset, msg.nbytes)
        n = self._collective_write(msg, offsets, lengths)
        _set_status(status, n)
        return n

    def _collective_write(self, msg, offsets, lengths) -> int:
        """The exchange of a collective write, ordered with this rank's other writes on PLFS.

        On PLFS, overlapping writes are ordered by per-process sequence numbers; an aggregator
        writes other ranks' bytes with its own. So that each rank's writes keep their call order
        (MPI's guarantee for one process's accesses), the ranks raise their sequence counters to
        a common floor before the exchange and again after it: an aggregator's records follow
        every earlier write of the ranks it serves, and precede their later ones.
        """
        self._plfs_sequence_floor()
        n = self._exchanger.write(msg.data, offsets, lengths)
        self._plfs_sequence_floor()
        return n

    def _plfs_sequence_floor(self) -> None:
        if not self._plfs:
            return
        from mpi4py import MPI

        from ..plfs.writer import advance_sequence, next_sequence

        advance_sequence(self.comm.allreduce(next_sequence(), op=MPI.MAX))

    def Read_at_all(self, offset: int, buf, status=None) -> int:
        """Collective read into ``buf`` from view offset ``offset``; returns bytes before end of file."""
        offset, msg = self._collective(lambda: self._prepare_read(offset, buf))
        offsets, lengths = self._view.extents(offset, msg.nbytes)
        self._exchanger.read(msg.data, offsets, lengths)
        n = self._count_before_eof(offsets, lengths)
        msg.finish(n)
        _set_status(status, n)
        return n

    def Write_all(self, buf, status=None) -> int:
        """Collective write at the individual file pointer, which advances."""
        n = self.Write_at_all(self._position, buf, status)
        self._position += n // self._view.etype_size
        return n

    def Read_all(self, buf, status=None) -> int:
        """Collective read at the individual file pointer, which advances by the data asked for."""
        asked = _asked(buf)
        n = self.Read_at_all(self._position, buf, status)
        self._position += asked // self._view.etype_size
        return n

    # -- non-blocking: done at the call, the request is complete --------------------------------
    def Iwrite_at(self, offset: int, buf):
        """Non-blocking ``Write_at``: done at once; returns a completed ``MPI.Grequest``."""
        return _completed_request(self.Write_at(offset, buf))

    def Iread_at(self, offset: int, buf):
        """Non-blocking ``Read_at``: done at once; returns a completed ``MPI.Grequest``."""
        return _completed_request(self.Read_at(offset, buf))

    def Iwrite(self, buf):
        """Non-blocking ``Write``: done at once; returns a completed ``MPI.Grequest``."""
        return _completed_request(self.Write(buf))

    def Iread(self, buf):
        """Non-blocking ``Read``: done at once; returns a completed ``MPI.Grequest``."""
        return _completed_request(self.Read(buf))

    def Iwrite_at_all(self, offset: int, buf):
        """Non-blocking collective ``Write_at_all``: done at the call (so it synchronises the
        ranks as the blocking call does); returns a completed ``MPI.Grequest``."""
        return _completed_request(self.Write_at_all(offset, buf))

    def Iread_at_all(self, offset: int, buf):
        """Non-blocking collective ``Read_at_all``, done at the call."""
        return _completed_request(self.Read_at_all(offset, buf))

    def Iwrite_all(self, buf):
        """Non-blocking collective ``Write_all``, done at the call."""
        return _completed_request(self.Write_all(buf))

    def Iread_all(self, buf):
        """Non-blocking collective ``Read_all``, done at the call."""
        return _completed_request(self.Read_all(buf))

    def Iwrite_shared(self, buf):
        """Non-blocking ``Write_shared``, done at the call."""
        return _completed_request(self.Write_shared(buf))

    def Iread_shared(self, buf):
        """Non-blocking ``Read_shared``, done at the call."""
        return _completed_request(self.Read_shared(buf))

    # -- split collectives: the work happens in *_begin ----------------------------------------
    def _begin(self, name: str, run) -> None:
        if self._split is not None:
            raise ValueError(f"{self.url}: a split collective ({self._split[0]}_begin) is already active; "
                             f"call {self._split[0]}_end first")
        self._split = (name, run())

    def _end(self, name: str, status) -> None:
        """Complete the split collective ``name``: ``status`` gets the byte count of its
        ``*_begin``. Nothing is returned, as mpi4py's ``*_end`` return None (the count is in
        ``status``, unlike the blocking calls, which return it here too)."""
        if self._split is None or self._split[0] != name:
            active = "none" if self._split is None else self._split[0] + "_begin"
            raise ValueError(f"{self.url}: {name}_end without {name}_begin (active: {active})")
        n = self._split[1]
        self._split = None
        _set_status(status, n)

    def Write_at_all_begin(self, offset: int, buf) -> None:
        """Start a split collective write at ``offset`` (the data are written here)."""
        self._begin("Write_at_all", lambda: self.Write_at_all(offset, buf))

    def Write_at_all_end(self, buf, status=None) -> None:
        """Complete a split collective write at an explicit offset; ``status`` gets the
        byte count. Returns None, as mpi4py does."""
        self._end("Write_at_all", status)

    def Read_at_all_begin(self, offset: int, buf) -> None:
        """Start a split collective read at ``offset`` (the data are read here)."""
        self._begin("Read_at_all", lambda: self.Read_at_all(offset, buf))

    def Read_at_all_end(self, buf, status=None) -> None:
        """Complete a split collective read at an explicit offset; ``status`` gets the
        byte count. Returns None, as mpi4py does."""
        self._end("Read_at_all", status)

    def Write_all_begin(self, buf) -> None:
        """Start a split collective write at the individual file pointer."""
        self._begin("Write_all", lambda: self.Write_all(buf))

    def Write_all_end(self, buf, status=None) -> None:
        """Complete a split collective write at the individual file pointer; ``status`` gets the
        byte count. Returns None, as mpi4py does."""
        self._end("Write_all", status)

    def Read_all_begin(self, buf) -> None:
        """Start a split collective read at the individual file pointer."""
        self._begin("Read_all", lambda: self.Read_all(buf))

    def Read_all_end(self, buf, status=None) -> None:
        """Complete a split collective read at the individual file pointer; ``status`` gets the
        byte count. Returns None, as mpi4py does."""
        self._end("Read_all", status)

    def Write_ordered_begin(self, buf) -> None:
        """Start a split collective write at the shared file pointer, in rank order."""
        self._begin("Write_ordered", lambda: self.Write_ordered(buf))

    def Write_ordered_end(self, buf, status=None) -> None:
        """Complete a split collective ordered write; ``status`` gets the
        byte count. Returns None, as mpi4py does."""
        self._end("Write_ordered", status)

    def Read_ordered_begin(self, buf) -> None:
        """Start a split collective read at the shared file pointer, in rank order."""
        self._begin("Read_ordered", lambda: self.Read_ordered(buf))

    def Read_ordered_end(self, buf, status=None) -> None:
        """Complete a split collective ordered read; ``status`` gets the
        byte count. Returns None, as mpi4py does."""
        self._end("Read_ordered", status)

    # -- shared file pointer ------------------------------------------------------------------
    def Write_shared(self, buf, status=None) -> int:
        """Independent write at the shared file pointer (an atomic fetch-and-add on rank 0)."""
        _, msg = self._prepare_write(0, buf)
        position = self._shared.fetch_add(msg.nbytes // self._view.etype_size)
        n = self._independent_write(position, msg)
        _set_status(status, n)
        return n

    def Read_shared(self, buf, status=None) -> int:
        """Independent read at the shared file pointer, which advances past what was read."""
        _, msg = self._prepare_read(0, buf)
        size_etypes = msg.nbytes // self._view.etype_size
        position = self._shared.fetch_add(size_etypes)
        n = self._independent_read(position, msg)
        _set_status(status, n)
        return n

    def _ordered(self, prepare, nbytes_of):
        prepared = self._collective(prepare)
        etypes = nbytes_of(prepared) // self._view.etype_size
        counts = np.array(self.comm.allgather(etypes), dtype=np.int64)
        base = self._shared.fetch_add_collective(int(counts.sum()))
        return prepared, base + int(counts[:self.comm.rank].sum())

    def Write_ordered(self, buf, status=None) -> int:
        """Collective write at the shared file pointer, the ranks' data in rank order."""
        (_, msg), position = self._ordered(lambda: self._prepare_write(0, buf), lambda p: p[1].nbytes)
        offsets, lengths = self._view.extents(position, msg.nbytes)
        n = self._collective_write(msg, offsets, lengths)
        _set_status(status, n)
        return n

    def Read_ordered(self, buf, status=None) -> int:
        """Collective read at the shared file pointer, the ranks' data in rank order."""
        (_, msg), position = self._ordered(lambda: self._prepare_read(0, buf), lambda p: p[1].nbytes)
        offsets, lengths = self._view.extents(position, msg.nbytes)
        self._exchanger.read(msg.data, offsets, lengths)
        n = self._count_before_eof(offsets, lengths)
        msg.finish(n)
        _set_status(status, n)
        return n

    def Seek_shared(self, offset: int, whence=SEEK_SET) -> None:
        """Collective: move the shared file pointer (every rank passes the same arguments)."""
        def prepare():
            self._check()
            if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
                raise TypeError(f"offset must be an integer, got {type(offset).__name__}")
            return _whence(whence)

        how = self._collective(prepare)
        base = 0
        if self.comm.rank == 0:
            base = self._eof_offset() if how == SEEK_END else (self._shared.get() if how == SEEK_CUR else 0)
        position = self.comm.bcast(base, root=0) + int(offset)
        self._shared.set_collective(position, self.url)

    seek_shared = Seek_shared

    def Get_position_shared(self) -> int:
        """The shared file pointer, in etypes."""
        self._check()
        return self._shared.get()

    # -- pointer, size, sync ------------------------------------------------------------------
    def Seek(self, offset: int, whence=SEEK_SET) -> int:
        """Move the individual file pointer (etypes of the view); ``whence`` is ``MPI.SEEK_SET``,
        ``MPI.SEEK_CUR`` or ``MPI.SEEK_END`` (``io.SEEK_*`` too). Returns the new position."""
        self._check()
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
            raise TypeError(f"offset must be an integer, got {type(offset).__name__}")
        how = _whence(whence)
        if how == SEEK_SET:
            position = int(offset)
        elif how == SEEK_CUR:
            position = self._position + int(offset)
        else:
            position = self._eof_offset() + int(offset)
        if position < 0:
            raise ValueError(f"seek to a negative position ({position}) in {self.url}")
        self._position = position
        return position

    def _eof_offset(self) -> int:
        """The view offset (etypes) of end of file, for ``SEEK_END``: the data bytes of the view
        before the file's end, in whole etypes (rounded down, as Open MPI does: a trailing
        partial etype is not skipped)."""
        self._exchanger.drain()
        size = self._target.size()
        view = self._view
        return view.bytes_before(size) // view.etype_size

    def Get_position(self) -> int:
        """The individual file pointer, in etypes."""
        self._check()
        return self._position

    def Get_size(self) -> int:
        """Current file size in bytes (PLFS write handles: the end of this rank's writes, or of
        every rank's as of the last Sync)."""
        self._check()
        self._exchanger.drain()
        return self._target.size()

    def Set_size(self, size: int) -> None:
        """Collective: truncate or extend the file to ``size`` bytes (extension reads as zeros)."""
        size = self._collective(lambda: (self._check(writing=True), self._resizable("MPI_File_set_size"),
                                         _offset(size, "size"))[2])
        self._resize(size, shrink=True)

    def Preallocate(self, size: int) -> None:
        """Collective: make the file at least ``size`` bytes long (allocating the blocks; the
        contents of existing bytes do not change)."""
        size = self._collective(lambda: (self._check(writing=True), self._resizable("MPI_File_preallocate"),
                                         _offset(size, "size"))[2])
        self._resize(size, shrink=False)

    def _resizable(self, call: str) -> None:
        if not hasattr(self._target.raw, "truncate") or self._target.fs.backend_name.lower().startswith("plfs"):
            raise NotImplementedError(f"{call} is not implemented for {self._target.fs.backend_name} files "
                                      f"({self.url}): their size is where the data end")

    def _resize(self, size: int, shrink: bool) -> None:
        error = None
        try:
            self._exchanger.flush_staged()
            self._exchanger.drain()
        except OSError as exc:
            error = exc
        self._exchanger._raise_collectively(error, "resize")
        self.comm.Barrier()
        error = None
        if self.comm.rank == 0:
            try:
                current = self._target.size()
                if size < current and shrink or size > current:
                    fd = self._target._fd
                    if not shrink and fd is not None and hasattr(os, "posix_fallocate"):
                        try:
                            os.posix_fallocate(fd, 0, size)
                        except OSError:
                            self._target.raw.truncate(size)
                    else:
                        self._target.raw.truncate(size)
            except OSError as exc:
                error = exc
        self._exchanger._raise_collectively(error, "resize")
        self.comm.Barrier()

    def Sync(self) -> None:
        """Collective: make every rank's writes durable and visible (fsync / hsync).

        A file open read-only raises ``io.UnsupportedOperation`` (``MPI.ERR_ACCESS``), as Open
        MPI's ``MPI_File_sync`` does for ``MODE_RDONLY``; write-only and read-write files sync.
        """
        def prepare():
            self._check()
            if not self.mode.write:
                # "sync:" makes it ERR_ACCESS (errors.py), the class Open MPI gives, not the
                # ERR_READ_ONLY of a write to a read-only file.
                raise io.UnsupportedOperation(f"sync: {self.url} is open read-only (mode {self.mode.name}); "
                                              "MPI_File_sync needs a file open for writing")

        self._collective(prepare)
        error = None
        try:
            self._exchanger.flush_staged()
            self._exchanger.drain()
            self._target.sync()
        except OSError as exc:
            error = exc
        self._exchanger._raise_collectively(error, "sync")
        from mpi4py import MPI

        # Handles that see only their own writes (PLFS) learn the file's end from every rank:
        # this allreduce is also the barrier.
        self._target.synced(self.comm.allreduce(self._target.size(), op=MPI.MAX))
        # sync-barrier-sync orders two ranks' writes of the same bytes (MPI's consistency rule):
        # on PLFS, where sequence numbers decide, a write after it must outrank any before it.
        self._plfs_sequence_floor()

    # -- modes, groups, hints, atomicity, errors ----------------------------------------------
    def Get_amode(self) -> int:
        """The MPI access mode (``MODE_RDONLY``/``WRONLY``/``RDWR`` with ``MODE_CREATE``,
        ``MODE_EXCL``): as passed to open, or the equivalent of the mode string."""
        self._check()  # a closed file is MPI.FILE_NULL in mpi4py: ERR_FILE, as every other call
        if self._amode is not None:
            return self._amode
        from mpi4py import MPI

        m = self.mode
        amode = MPI.MODE_RDWR if m.read and m.write else (MPI.MODE_RDONLY if m.read else MPI.MODE_WRONLY)
        return amode | (MPI.MODE_CREATE if m.create else 0) | (MPI.MODE_EXCL if m.exclusive else 0)

    def Get_group(self):
        """The group of the communicator that opened the file (free it with ``Free()``)."""
        self._check()
        return self.comm.Get_group()

    def Get_info(self):
        """The hints in use, as a new ``MPI.Info`` (free it with ``Free()``)."""
        self._check()
        from mpi4py import MPI

        info = MPI.Info.Create()
        for key, value in self.hints.as_dict().items():
            if value is not None:
                info.Set(key, str(value).lower() if isinstance(value, bool) else str(value))
        return info

    def Set_info(self, info) -> None:
        """Collective: change hints (the same on every rank); pending writes are flushed first."""
        self._check()
        self._merge_info(info)

    def _merge_info(self, info) -> None:
        def prepare():
            merged = dict(self.hints.as_dict())
            merged.update(_info_items(info) or {})
            return parse_hints({k: v for k, v in merged.items() if v is not None})

        parsed = self._collective(prepare)
        everyone = self.comm.allgather(parsed.as_dict())
        if any(theirs != everyone[0] for theirs in everyone):
            raise ValueError(f"{self.url}: hints must be the same on every rank")
        if parsed.as_dict() == self.hints.as_dict():
            return
        self._exchanger.close()
        aggregators = choose_aggregators(node_map(self.comm), parsed)
        self.hints = parsed
        self._exchanger = Exchanger(self.comm, self._target, aggregators, parsed)

    def Get_atomicity(self) -> bool:
        """False: hpcbridge runs in MPI's non-atomic mode."""
        self._check()
        return False

    def Set_atomicity(self, flag: bool) -> None:
        """Collective. ``False`` (non-atomic mode) is what hpcbridge does; ``True`` raises
        NotImplementedError on every rank."""
        def prepare():
            self._check()
            if flag:
                raise NotImplementedError("MPI_File_set_atomicity(true) is not implemented by hpcbridge.mpi.File: "
                                          "its writes are not atomic across ranks; use Sync and Barrier")

        self._collective(prepare)

    def Get_errhandler(self):
        """A new handle of ``MPI.ERRORS_RETURN`` (errors are Python exceptions, as mpi4py raises
        them), which the caller may ``Free()`` as MPI_File_get_errhandler's result."""
        from mpi4py import MPI

        # MPI_File_get_errhandler returns a new reference, and MPI programs free it. Handing out
        # the predefined MPI.ERRORS_RETURN object itself let that Free() release a reference
        # Open MPI never gave (free(): invalid pointer, an abort at MPI finalisation). The
        # default file error handler (on MPI.FILE_NULL) is ERRORS_RETURN and comes with one.
        errhandler = MPI.FILE_NULL.Get_errhandler()
        if errhandler == MPI.ERRORS_RETURN:
            return errhandler
        errhandler.Free()  # the program changed the default; hpcbridge still raises exceptions
        return MPI.ERRORS_RETURN

    def Set_errhandler(self, errhandler) -> None:
        """Only ``MPI.ERRORS_RETURN`` (Python exceptions) is available."""
        from mpi4py import MPI

        if errhandler != MPI.ERRORS_RETURN:
            raise NotImplementedError("MPI_File_set_errhandler is not implemented by hpcbridge.mpi.File for "
                                      "handlers other than MPI.ERRORS_RETURN: errors are Python exceptions")

    Call_errhandler = _not_implemented("MPI_File_call_errhandler", "errors are Python exceptions")
    Create_errhandler = classmethod(_not_implemented("MPI_File_create_errhandler",
                                                     "errors are Python exceptions"))
    f2py = classmethod(_not_implemented("MPI_File_f2c", "an hpcbridge file has no MPI handle"))
    fromhandle = classmethod(_not_implemented("MPI_File (fromhandle)", "an hpcbridge file has no MPI handle"))
    fromint = classmethod(_not_implemented("MPI_File (fromint)", "an hpcbridge file has no MPI handle"))
    py2f = _not_implemented("MPI_File_c2f", "an hpcbridge file has no MPI handle")
    toint = _not_implemented("MPI_File (toint)", "an hpcbridge file has no MPI handle")

    @property
    def handle(self):
        """Not available: an hpcbridge file has no MPI handle (raises NotImplementedError)."""
        raise NotImplementedError("MPI_File handle is not available: an hpcbridge file has no MPI handle")

    # Properties of mpi4py's File.
    amode = property(Get_amode, doc="The access mode (Get_amode).")
    atomicity = property(Get_atomicity, Set_atomicity, doc="Atomic mode (Get/Set_atomicity).")
    group = property(Get_group, doc="The group of the file (Get_group).")
    info = property(Get_info, Set_info, doc="The hints (Get/Set_info).")
    size = property(Get_size, doc="The file size (Get_size).")

    @property
    def group_size(self) -> int:
        """Number of ranks sharing the file."""
        return self.comm.Get_size()

    @property
    def group_rank(self) -> int:
        """This rank in the file's group."""
        return self.comm.Get_rank()

    def _count_before_eof(self, offsets: np.ndarray, lengths: np.ndarray) -> int:
        if offsets.size == 0:
            return 0
        self._exchanger.drain()
        size = self._target.size()
        return int(np.clip(np.minimum(offsets + lengths, size) - offsets, 0, None).sum())

    def __repr__(self) -> str:
        state = "closed" if self._closed else self.mode.name
        return f"<hpcbridge.mpi.File {self.url} {state} ranks={self.comm.size} aggregators={self.aggregators}>"


#: The public methods and properties of ``mpi4py.MPI.File`` (4.x), all of which File has, under
#: these names and in lower case.
MPI_FILE_METHODS = (
    "Call_errhandler", "Close", "Create_errhandler", "Delete", "Get_amode", "Get_atomicity", "Get_byte_offset",
    "Get_errhandler", "Get_group", "Get_info", "Get_position", "Get_position_shared", "Get_size",
    "Get_type_extent", "Get_view", "Iread", "Iread_all", "Iread_at", "Iread_at_all", "Iread_shared", "Iwrite",
    "Iwrite_all", "Iwrite_at", "Iwrite_at_all", "Iwrite_shared", "Open", "Preallocate", "Read", "Read_all",
    "Read_all_begin", "Read_all_end", "Read_at", "Read_at_all", "Read_at_all_begin", "Read_at_all_end",
    "Read_ordered", "Read_ordered_begin", "Read_ordered_end", "Read_shared", "Seek", "Seek_shared",
    "Set_atomicity", "Set_errhandler", "Set_info", "Set_size", "Set_view", "Sync", "Write", "Write_all",
    "Write_all_begin", "Write_all_end", "Write_at", "Write_at_all", "Write_at_all_begin", "Write_at_all_end",
    "Write_ordered", "Write_ordered_begin", "Write_ordered_end", "Write_shared",
)

for _name in MPI_FILE_METHODS:
    # Errors leave every method as mpi4py's do, MPI.Exception too (see errors.py); the lower-case
    # names are the same functions (classmethods too).
    _original = File.__dict__[_name]
    _wrapped = classmethod(mpi_errors(_original.__func__)) if isinstance(_original, classmethod) \
        else mpi_errors(_original)
    setattr(File, _name, _wrapped)
    if File.__dict__.get(_name.lower(), _original) is _original:
        setattr(File, _name.lower(), _wrapped)
del _name, _original, _wrapped


def _asked(buf) -> int:
    """Bytes a read asks for (0 for a bad buffer: the call itself reports that)."""
    try:
        return message(buf, writable=True).nbytes
    except (TypeError, ValueError):
        return 0


def _dup(datatype):
    """A duplicate of a derived MPI datatype (the caller may free theirs after Set_view)."""
    if datatype is None or not hasattr(datatype, "Dup") or getattr(datatype, "is_predefined", True):
        return datatype
    return datatype.Dup()


def _info_items(info):
    """Hints from an ``MPI.Info``, a mapping or None (MPI.INFO_NULL too)."""
    if info is None:
        return None
    if hasattr(info, "Get_nkeys"):
        from mpi4py import MPI

        if info == MPI.INFO_NULL:
            return None
    return info


class _SharedPointer:
    """The shared file pointer: one int64 in an MPI window on rank 0, moved with atomic
    ``Fetch_and_op`` (passive target), as ``MPI_File_*_shared`` need."""

    def __init__(self, comm):
        from mpi4py import MPI

        self.MPI = MPI
        self.comm = comm
        self.win = MPI.Win.Allocate(8 if comm.rank == 0 else 0, 8, comm=comm)
        if comm.rank == 0:
            np.frombuffer(self.win.tomemory(), dtype=np.int64)[0] = 0
        comm.Barrier()

    def fetch_add(self, n: int) -> int:
        MPI = self.MPI
        value, old = np.array([n], dtype=np.int64), np.zeros(1, dtype=np.int64)
        self.win.Lock(0, MPI.LOCK_SHARED)
        self.win.Fetch_and_op(value, old, 0, 0, MPI.SUM)
        self.win.Unlock(0)
        return int(old[0])

    def get(self) -> int:
        return self.fetch_add(0)

    def fetch_add_collective(self, n: int) -> int:
        base = self.fetch_add(n) if self.comm.rank == 0 else None
        return self.comm.bcast(base, root=0)

    def set_collective(self, position: int, url: str) -> None:
        if position < 0:
            # Every rank computed the same position from the same arguments: all raise.
            raise ValueError(f"seek to a negative shared position ({position}) in {url}")
        self.comm.Barrier()
        if self.comm.rank == 0:
            MPI = self.MPI
            value, old = np.array([position], dtype=np.int64), np.zeros(1, dtype=np.int64)
            self.win.Lock(0, MPI.LOCK_EXCLUSIVE)
            self.win.Fetch_and_op(value, old, 0, 0, MPI.REPLACE)
            self.win.Unlock(0)
        self.comm.Barrier()

    def reset(self) -> None:
        self.set_collective(0, "")

    def free(self) -> None:
        if self.win is not None:
            self.win.Free()
            self.win = None
