"""``hpcbridge.plfs.open``: one logical file, many writers, with or without MPI."""

from __future__ import annotations

import secrets

from ..fs.api import url_to_fs
from ..fs.file import OpenMode
from .fs import PlfsFileSystem, _PlfsReadRaw, _PlfsWriteRaw
from .writer import advance_sequence

__all__ = ["open"]


class _CollectiveWriteRaw(_PlfsWriteRaw):
    """A rank's writer whose close is collective: one metadata record for the whole job."""

    def __init__(self, *args, comm, job: str, flatten: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self._comm = comm
        self._job = job
        self._flatten = flatten

    def close(self) -> None:
        """Collective: every rank closes its writer; rank 0 writes the job's metadata record.

        A rank whose close fails still takes part (no rank is left waiting), and every rank
        raises the first error: the job's record lists the writers whose index is complete.
        """
        if self.closed:
            return
        error = None
        try:
            self._writer.close(write_meta=False)
        except Exception as exc:
            error = exc
        finally:
            super(_PlfsWriteRaw, self).close()
        writer = self._writer
        summary = writer.summary() if writer.index.reached == writer.index.end else None
        gathered = self._comm.gather((summary, error), root=0)
        recorded = False
        if self._comm.rank == 0:
            try:
                summaries = [s for s, _ in gathered if s is not None]
                writer.container.write_meta(f"job.{self._job}", summaries)
                recorded = True
                if self._flatten and len(summaries) == len(gathered):
                    from .tools import flatten

                    flatten(writer.container)  # one rank persists the resolved index for later readers
            except Exception as exc:
                error = error or exc
            error = error or next((e for _, e in gathered if e is not None), None)
        error, recorded = self._comm.bcast((error, recorded), root=0)
        if recorded and summary is not None:
            # Only now that the job's record lists it: until then its open record is what tells
            # readers (sizes, sequence numbers) and recovery that this writer exists.
            try:
                writer.container.mark_closed(writer.writer)
            except Exception as exc:
                error = error or exc
        if error is not None:
            raise error


def open(url, mode: str = "rb", comm=None, shared: bool = False, flatten: bool = False, **options):
    """Open a PLFS logical file; with ``comm`` (an mpi4py communicator) the open is collective.

    Parameters
    ----------
    url:
        ``plfs+file:///path``, ``plfs+hdfs://nn:port/path``, or several volumes
        ``plfs+file:///a/ckpt,/b/ckpt``.
    mode:
        ``"rb"``, ``"wb"``, ``"xb"``, ``"ab"``.
    comm:
        MPI communicator. Writing: rank 0 creates (or truncates) the container, every rank gets
        its own writer (id = job base + rank), and ``close`` writes one metadata record for the
        job. Reading: the ranks read the index logs in parallel and allgather them.
    shared:
        Without MPI: ``"wb"`` joins the logical file as one more writer instead of truncating it
        (several processes writing one file; the first creates the container).
    flatten:
        With ``comm`` and a write mode: at the collective close, rank 0 persists the resolved
        index (``flat.index``), so later opens need not read every index log.
    **options:
        Options of :class:`~hpcbridge.plfs.fs.PlfsFileSystem` and of the backing store.

    Returns
    -------
    A file object: write handles offer ``write``/``pwrite``/``seek``/``sync``; read handles are
    buffered readers with ``pread``/``preadinto``.
    """
    if comm is None:
        fs, path = url_to_fs(url, **options)
        if not isinstance(fs, PlfsFileSystem):
            raise ValueError(f"{url!r} is not a PLFS URL (plfs+file://..., plfs+hdfs://...)")
        if shared:
            if mode not in ("wb", "w"):
                raise ValueError(f"shared=True is for writing ('wb'), not {mode!r}")
            return fs.open_writer(path)
        return fs.open(path, mode)
    fs, path = url_to_fs(url, **options)
    if not isinstance(fs, PlfsFileSystem):
        raise ValueError(f"{url!r} is not a PLFS URL (plfs+file://..., plfs+hdfs://...)")
    return fs.open_collective(path, mode, comm, flatten=flatten)


def open_collective(fs: PlfsFileSystem, path, mode: str, comm, flatten: bool = False):
    """The collective open of :func:`open` on file system ``fs`` (what
    :meth:`PlfsFileSystem.open_collective` runs)."""
    p = fs._path(path)
    m = OpenMode.parse(mode, fs.url(p))
    if m.text or (m.readable and m.writable):
        raise ValueError(f"collective PLFS opens take rb, wb, xb or ab, not {mode!r} ({fs.url(p)})")
    container = fs.container(p)
    if m.readable:
        raw = _PlfsReadRaw(fs, p, fs.reader(container, comm=comm), m)
        return fs._wrap(raw, m, -1, None, None, None)
    setup = None
    if comm.rank == 0:
        try:
            fs.prepare_container(p, m, writers_hint=comm.size)
            base = secrets.randbits(32) % (2**32 - comm.size)  # not `random`: applications seed it
            setup = ("ok", base, container.max_sequence(), fs._info(p).size if m.append else 0)
        except Exception as exc:  # every rank raises the same error
            setup = ("error", exc)
    setup = comm.bcast(setup, root=0)
    if setup[0] == "error":
        raise setup[1]
    _, base, max_sequence, start = setup
    advance_sequence(max_sequence)
    writer, error = None, None
    try:
        writer = fs.new_writer(container, base + comm.rank)
    except Exception as exc:
        error = exc
    errors = comm.allgather(error)
    first = next((e for e in errors if e is not None), None)
    if first is not None:  # the same error on every rank, and no writer left open
        if writer is not None:
            writer.close(write_meta=False)
            container.mark_closed(writer.writer)  # it wrote nothing: no record to write
        raise first
    return _CollectiveWriteRaw(fs, p, writer, m, start, comm=comm, job=f"{base:08x}", flatten=flatten)
