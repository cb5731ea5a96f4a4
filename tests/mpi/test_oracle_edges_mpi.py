"""Edges an audit against Open MPI found, each run on ``MPI.File`` (the oracle) and on
``hpcbridge.mpi.File`` with the same arguments, on POSIX and PLFS on POSIX: collective
write-behind with calls that go back over earlier ones, Fortran-ordered numpy buffers, an
independent read past the end of file (the rest of the buffer untouched), the amodes
``MODE_APPEND``, ``MODE_DELETE_ON_CLOSE`` and ``MODE_UNIQUE_OPEN``, hints the MPI standard
reserves, filetypes with empty blocks, buffers that are not whole elements, the error classes of
views MPI forbids."""

from __future__ import annotations

import os

import numpy as np
import pytest

import hpcbridge
from hpcbridge.mpi import File

from .conftest import LOCAL_BACKENDS, backend_url, run_on_all_ranks, take_files

pytestmark = pytest.mark.mpi(min_size=1)


def _both(comm, directory, backend, name, write, read=None, hints=None):
    """``write(f, comm)`` on a file opened write-only, then ``read(f, comm)`` on it opened
    read-only (PLFS handles are one or the other), on Open MPI and on hpcbridge;
    ``(read results, read results, bytes, bytes)`` (the files' bytes on rank 0, None elsewhere)."""
    from mpi4py import MPI

    oracle = os.path.join(directory, f"{name}.ompi")
    url, options = backend_url(backend, directory, name)
    results = []
    for opener, where, extra in ((MPI.File.Open, oracle, {}), (File.Open, url, dict(options, hints=hints))):
        f = opener(comm, where, MPI.MODE_WRONLY | MPI.MODE_CREATE, **extra)
        try:
            write(f, comm)
        finally:
            f.Close()
        if read is None:
            results.append(None)
            continue
        f = opener(comm, where, MPI.MODE_RDONLY, **({} if opener is MPI.File.Open else options))
        try:
            results.append(read(f, comm))
        finally:
            f.Close()
    comm.Barrier()
    want_bytes, got_bytes = take_files(oracle, url, options) if comm.rank == 0 else (None, None)
    comm.Barrier()
    return results[0], results[1], want_bytes, got_bytes


def _fill(n, value):
    return np.full(n, value, dtype=np.uint8)


#: Collective writes of 8 bytes per rank at these offsets of its view, in this order: later calls
#: below or over earlier ones.
SEQUENCES = {
    "lower": [100, 0],
    "overlapping": [0, 4, 2],
    "mixed": [50, 10, 12, 11, 3000, 5],
}


@pytest.mark.parametrize("backend", LOCAL_BACKENDS)
@pytest.mark.parametrize("sequence", sorted(SEQUENCES))
@pytest.mark.parametrize("buffer_size", ["64", "16m"])
def test_write_behind_with_calls_going_back_equals_open_mpi(world, mpi_tmp_path, backend, sequence, buffer_size):
    """cb_write_behind stages calls; a later one below or over an earlier one lost its bytes
    or put them in the wrong place (the stage was written as if in file order)."""
    def write(f, comm):
        f.Set_view(comm.rank * 10_000)
        for i, offset in enumerate(SEQUENCES[sequence]):
            f.Write_at_all(offset, _fill(8, 0x10 * comm.rank + i + 1))

    def check():
        _, _, want, got = _both(world, str(mpi_tmp_path), backend, f"behind-{sequence}-{buffer_size}", write,
                                hints={"cb_write_behind": "true", "cb_buffer_size": buffer_size})
        assert want == got

    run_on_all_ranks(world, check)


@pytest.mark.parametrize("backend", LOCAL_BACKENDS)
def test_fortran_ordered_buffers_move_in_memory_order(world, mpi_tmp_path, backend):
    def write(f, comm):
        f.Write_at_all(12 * comm.rank, np.asfortranarray((np.arange(12, dtype=np.uint8) + 16 * comm.rank).reshape(3, 4)))

    def read(f, comm):
        back = np.asfortranarray(np.zeros((3, 4), np.uint8))
        f.Read_at(12 * comm.rank, back)
        return back.tobytes(order="A")

    def check():
        want, got, want_bytes, got_bytes = _both(world, str(mpi_tmp_path), backend, "fortran", write, read)
        assert want == got and want_bytes == got_bytes

    run_on_all_ranks(world, check)


@pytest.mark.parametrize("backend", LOCAL_BACKENDS)
def test_independent_read_past_the_end_leaves_the_rest_of_the_buffer(world, mpi_tmp_path, backend):
    from mpi4py import MPI

    def write(f, comm):
        if comm.rank == 0:
            f.Write_at(0, np.arange(10, dtype=np.uint8) + 0x30)

    def read(f, comm):
        buffer = _fill(6, 0xEE)
        status = MPI.Status()
        f.Read_at(7, buffer, status)
        return status.Get_count(MPI.BYTE), buffer.tobytes()

    def check():
        want, got, want_bytes, got_bytes = _both(world, str(mpi_tmp_path), backend, "past-eof", write, read)
        assert want == got == (3, bytes([0x37, 0x38, 0x39]) + b"\xee" * 3)
        assert want_bytes == got_bytes

    run_on_all_ranks(world, check)


@pytest.mark.parametrize("backend", ["posix"])  # MPI opens of PLFS files rewrite them whole (docs/plfs.md)
def test_append_delete_on_close_and_unique_open_as_open_mpi(world, mpi_tmp_path, backend):
    from mpi4py import MPI

    directory = str(mpi_tmp_path)

    def check():
        oracle = os.path.join(directory, "amode.ompi")
        url, options = backend_url(backend, directory, "amode")
        results = {}
        for side, opener, name in (("ompi", MPI.File.Open, oracle), ("hb", File.Open, url)):
            extra = {} if side == "ompi" else options
            f = opener(world, name, MPI.MODE_WRONLY | MPI.MODE_CREATE, **extra)
            if world.rank == 0:
                f.Write_at(0, _fill(10, 0x41))
            f.Close()
            f = opener(world, name, MPI.MODE_WRONLY | MPI.MODE_APPEND | MPI.MODE_UNIQUE_OPEN, **extra)
            start = f.Get_position(), f.Get_position_shared()
            f.Write_ordered(_fill(2, 0x61 + world.rank))  # at the end, in rank order
            f.Close()
            f = opener(world, name, MPI.MODE_RDONLY | MPI.MODE_DELETE_ON_CLOSE, **extra)
            size = f.Get_size()
            f.Close()
            world.Barrier()
            fs, path = hpcbridge.url_to_fs(url, **options)
            exists = os.path.exists(oracle) if side == "ompi" else fs.exists(path)
            results[side] = (start, size, exists)
        assert results["hb"] == results["ompi"] == ((10, 10), 10 + 2 * world.size, False)

    run_on_all_ranks(world, check)


@pytest.mark.parametrize("backend", LOCAL_BACKENDS)
def test_reserved_hints_are_accepted(world, mpi_tmp_path, backend):
    from mpi4py import MPI

    def check():
        info = MPI.Info.Create()
        for key, value in (("access_style", "write_once"), ("striping_factor", "4"), ("romio_cb_write", "disable"),
                           ("collective_buffering", "true")):
            info.Set(key, value)
        try:
            url, options = backend_url(backend, str(mpi_tmp_path), "reserved")
            f = File.Open(world, url, MPI.MODE_WRONLY | MPI.MODE_CREATE, info, **options)
            assert f.hints.cb_write == "disable"  # romio_cb_write is cb_write
            f.Write_at_all(world.rank, _fill(1, world.rank))
            f.Close()
        finally:
            info.Free()
        world.Barrier()
        if world.rank == 0:
            fs, path = hpcbridge.url_to_fs(url, **options)
            fs.rm(path, recursive=True)
        world.Barrier()

    run_on_all_ranks(world, check)


#: Mistakes, each made on Open MPI's File and on hpcbridge's (``f``: a file open read-write on
#: POSIX holding 10 bytes; ``path``: its path; ``other``: a path that does not exist).
MISTAKES = {
    "exclusive create of an existing file": lambda F, MPI, f, path, other: F.Open(
        MPI.COMM_SELF, path, MPI.MODE_WRONLY | MPI.MODE_CREATE | MPI.MODE_EXCL),
    "open of a missing file without MODE_CREATE": lambda F, MPI, f, path, other: F.Open(
        MPI.COMM_SELF, other, MPI.MODE_RDONLY),
    "MODE_RDONLY with MODE_CREATE": lambda F, MPI, f, path, other: F.Open(
        MPI.COMM_SELF, other, MPI.MODE_RDONLY | MPI.MODE_CREATE),
    "write on a read-only file": lambda F, MPI, f, path, other: _reopened(F, MPI, path, MPI.MODE_RDONLY).Write_at(
        0, _fill(1, 1)),
    "read on a write-only file": lambda F, MPI, f, path, other: _reopened(F, MPI, path, MPI.MODE_WRONLY).Read_at(
        0, _fill(1, 1)),
    "delete of a missing file": lambda F, MPI, f, path, other: F.Delete(other),
    "Get_amode of a closed file": lambda F, MPI, f, path, other: _closed(F, MPI, path).Get_amode(),
    "Get_group of a closed file": lambda F, MPI, f, path, other: _closed(F, MPI, path).Get_group(),
    "Sync of a read-only file": lambda F, MPI, f, path, other: _reopened(F, MPI, path, MPI.MODE_RDONLY).Sync(),
}


def _closed(F, MPI, path):
    handle = F.Open(MPI.COMM_SELF, path, MPI.MODE_RDWR)
    handle.Close()
    return handle


def _reopened(F, MPI, path, amode):
    handle = F.Open(MPI.COMM_SELF, path, amode)
    _OPENED.append(handle)
    return handle


_OPENED: list = []


def test_mistakes_raise_mpi_exceptions_of_open_mpis_error_class(mpi_tmp_path):
    """mpi4py code catches MPI.Exception and asks its error class; hpcbridge's exceptions are
    also their Python type (naming the URL)."""
    from mpi4py import MPI

    from hpcbridge.mpi.file import File as HbFile

    directory = os.path.join(str(mpi_tmp_path), f"mistakes-{MPI.COMM_WORLD.rank}")
    os.makedirs(directory, exist_ok=True)
    classes = {}
    for side, F in (("ompi", MPI.File), ("hb", HbFile)):
        path, other = os.path.join(directory, f"{side}.bin"), os.path.join(directory, f"{side}-missing.bin")
        with open(path, "wb") as handle:
            handle.write(bytes(10))
        for name, mistake in MISTAKES.items():
            try:
                mistake(F, MPI, None, path, other)
                classes[side, name] = None
            except MPI.Exception as exc:
                classes[side, name] = MPI.Get_error_string(exc.Get_error_class()).split(":")[0]
                if side == "hb":
                    assert isinstance(exc, (OSError, ValueError)) and directory in str(exc), (name, exc)
            finally:
                while _OPENED:
                    _OPENED.pop().Close()
    for name in MISTAKES:
        assert classes["ompi", name] is not None and classes["hb", name] == classes["ompi", name], (name, classes)
    # Get_info of a closed file: Open MPI says ERR_COMM, the standard's class for a bad file is
    # ERR_FILE (what every other call of a closed file raises, on both); hpcbridge returned hints.
    with pytest.raises(MPI.Exception) as caught:
        _closed(HbFile, MPI, os.path.join(directory, "hb.bin")).Get_info()
    assert caught.value.Get_error_class() == MPI.ERR_FILE


@pytest.mark.parametrize("backend", LOCAL_BACKENDS)
def test_filetypes_with_empty_blocks_are_views_as_in_open_mpi(world, mpi_tmp_path, backend):
    """An empty block (count 0, displacement anywhere) is not in MPI's typemap; Set_view refused
    it as a displacement going back."""
    from mpi4py import MPI

    def filetypes():
        hindexed = MPI.BYTE.Create_hindexed([2, 0, 1], [0, 0, 3]).Create_resized(0, 4)
        struct = MPI.Datatype.Create_struct([2, 0, 2], [0, 0, 4], [MPI.BYTE, MPI.INT, MPI.BYTE])
        return [t.Commit() for t in (hindexed, struct)]

    def write(f, comm):
        for k, filetype in enumerate(filetypes()):
            f.Set_view(1000 * k + 100 * comm.rank, MPI.BYTE, filetype)
            f.Write_all(np.arange(6, dtype=np.uint8) + 16 * comm.rank + 1)
            f.Set_view(0)
            filetype.Free()

    def read(f, comm):
        out = []
        for k, filetype in enumerate(filetypes()):
            f.Set_view(1000 * k + 100 * comm.rank, MPI.BYTE, filetype)
            out.append([f.Get_byte_offset(i) for i in range(5)])
            filetype.Free()
        return out

    def check():
        want, got, want_bytes, got_bytes = _both(world, str(mpi_tmp_path), backend, "empty-blocks", write, read)
        assert want == got and want_bytes == got_bytes

    run_on_all_ranks(world, check)


def test_a_buffer_that_is_not_whole_elements_is_refused_as_mpi4py_does(mpi_tmp_path):
    """[buf, MPI.INT] of 10 bytes: mpi4py refuses to infer the count; hpcbridge wrote 8 bytes."""
    from mpi4py import MPI

    errors = []
    for F, where in ((MPI.File, os.path.join(str(mpi_tmp_path), f"count-{MPI.COMM_WORLD.rank}.ompi")),
                     (File, f"file://{mpi_tmp_path}/count-{MPI.COMM_WORLD.rank}.hb")):
        f = F.Open(MPI.COMM_SELF, where, MPI.MODE_RDWR | MPI.MODE_CREATE)
        try:
            with pytest.raises(ValueError) as error:
                f.Write_at(0, [bytearray(10), MPI.INT])
            errors.append(str(error.value))
            assert f.Get_size() == 0
        finally:
            f.Close()
    assert errors[0] == errors[1]


@pytest.mark.parametrize("backend", LOCAL_BACKENDS)
def test_a_write_after_sync_barrier_sync_wins_as_in_open_mpi(world, mpi_tmp_path, backend):
    """MPI orders two ranks' writes of the same bytes separated by sync-barrier-sync. On PLFS
    the later write of rank 0 lost to the last rank's 20 earlier one-byte writes (each process
    numbers its writes itself)."""
    def write(f, comm):
        if comm.rank == comm.size - 1:
            for k in range(20):
                f.Write_at(k, _fill(1, 0xBB))
        f.Sync()
        comm.Barrier()
        f.Sync()
        if comm.rank == 0:
            f.Write_at(0, _fill(20, 0xAA))

    def check():
        _, _, want, got = _both(world, str(mpi_tmp_path), backend, "sync-order", write)
        if world.rank == 0:
            assert want == got == bytes([0xAA]) * 20

    if world.size < 2:
        pytest.skip("needs two ranks")
    run_on_all_ranks(world, check)


@pytest.mark.parametrize("backend", LOCAL_BACKENDS)
def test_a_missing_file_opened_without_mode_create_is_enoent_as_in_open_mpi(world, mpi_tmp_path, backend):
    """PLFS created the file (a container) where Open MPI says ERR_NO_SUCH_FILE."""
    from mpi4py import MPI

    classes = []
    for opener, where, options in ((MPI.File.Open, os.path.join(str(mpi_tmp_path), "enoent.ompi"), {}),
                                   (File.Open, *backend_url(backend, str(mpi_tmp_path), "enoent"))):
        with pytest.raises(MPI.Exception) as error:
            opener(world, where, MPI.MODE_WRONLY, **options)
        classes.append(error.value.Get_error_class())
    assert classes[0] == classes[1] == MPI.ERR_NO_SUCH_FILE
    url, options = backend_url(backend, str(mpi_tmp_path), "enoent")
    assert not hpcbridge.url_to_fs(url, **options)[0].exists(url)


#: Views MPI forbids, each set on Open MPI's File and on hpcbridge's: ``(etype, filetype,
#: datarep)`` from MPI (filetypes committed; the test frees them).
BAD_VIEWS = {
    "negative hindexed displacement": lambda MPI: (MPI.BYTE, MPI.BYTE.Create_hindexed([2, 2], [4, -2]), "native"),
    "decreasing hindexed displacements": lambda MPI: (MPI.BYTE, MPI.BYTE.Create_hindexed([2, 2], [6, 0]), "native"),
    "negative hvector stride": lambda MPI: (MPI.BYTE, MPI.BYTE.Create_hvector(3, 2, -4), "native"),
    "overlapping blocks": lambda MPI: (MPI.BYTE, MPI.BYTE.Create_hindexed([4, 2], [0, 2]), "native"),
    "unknown data representation": lambda MPI: (MPI.INT, MPI.INT.Create_contiguous(1), "internal"),
}


@pytest.mark.parametrize("case", sorted(BAD_VIEWS))
def test_bad_views_raise_open_mpis_error_class(world, mpi_tmp_path, case):
    """Filetypes that break MPI's view rules are ERR_TYPE in Open MPI (hpcbridge said ERR_ARG),
    unknown data representations ERR_UNSUPPORTED_DATAREP (hpcbridge: ERR_UNSUPPORTED_OPERATION)."""
    from mpi4py import MPI

    classes = []
    for opener, where in ((MPI.File.Open, os.path.join(str(mpi_tmp_path), "view.ompi")),
                          (File.Open, f"file://{mpi_tmp_path}/view.hb")):
        etype, filetype, datarep = BAD_VIEWS[case](MPI)
        filetype.Commit()
        f = opener(world, where, MPI.MODE_RDWR | MPI.MODE_CREATE)
        try:
            with pytest.raises(MPI.Exception) as error:
                f.Set_view(0, etype, filetype, datarep)
            classes.append(MPI.Get_error_string(error.value.Get_error_class()).split(":")[0])
        finally:
            f.Close()
            filetype.Free()
    assert classes[1] == classes[0], classes


#: darray filetypes ``(gsizes, distribs, dargs, psizes, order)`` for ``P`` ranks, with names
#: of MPI's constants (the process grid is every rank of the world).
DARRAYS = {
    "block-rows": lambda P: ([4 * P + 1, 3], ["BLOCK", "NONE"], ["DFLT", "DFLT"], [P, 1], "C"),
    "cyclic-2": lambda P: ([5 * P + 3], ["CYCLIC"], [2], [P], "C"),
    "block-cyclic-fortran": lambda P: ([6, 2 * P + 1], ["CYCLIC", "BLOCK"], ["DFLT", "DFLT"], [1, P], "FORTRAN"),
    # Blocks of 2 rows of 3: from 3 ranks on, the last owns nothing (a filetype of no bytes, which
    # hpcbridge refused, on every rank, where Open MPI takes it).
    "empty-share": lambda P: ([2 * (P - 1), 3], ["BLOCK", "NONE"], [2, "DFLT"], [P, 1], "C"),
}


@pytest.mark.parametrize("backend", LOCAL_BACKENDS)
@pytest.mark.parametrize("case", sorted(DARRAYS))
def test_darray_views_write_and_read_as_in_open_mpi(world, mpi_tmp_path, backend, case):
    """Set_view with a darray filetype (refused with ValueError before): each rank writes its
    block-cyclic share of a global INT array collectively and reads it back, also a rank whose
    share is empty."""
    from mpi4py import MPI

    def filetype(comm):
        gsizes, distribs, dargs, psizes, order = DARRAYS[case](comm.size)
        constant = {"BLOCK": MPI.DISTRIBUTE_BLOCK, "CYCLIC": MPI.DISTRIBUTE_CYCLIC, "NONE": MPI.DISTRIBUTE_NONE,
                    "DFLT": MPI.DISTRIBUTE_DFLT_DARG}
        return MPI.INT.Create_darray(comm.size, comm.rank, gsizes, [constant[d] for d in distribs],
                                     [d if isinstance(d, int) else constant[d] for d in dargs], psizes,
                                     order=getattr(MPI, f"ORDER_{order}")).Commit()

    def write(f, comm):
        darray = filetype(comm)
        try:
            f.Set_view(8, MPI.INT, darray)
            n = darray.Get_size() // 4
            f.Write_all(np.arange(n, dtype=np.int32) + 1000 * (comm.rank + 1))
        finally:
            darray.Free()

    def read(f, comm):
        darray = filetype(comm)
        try:
            f.Set_view(8, MPI.INT, darray)
            back = np.full(darray.Get_size() // 4, -1, dtype=np.int32)
            f.Read_all(back)
            return back.tobytes(), [f.Get_byte_offset(i) for i in range(back.size)]
        finally:
            darray.Free()

    def check():
        want, got, want_bytes, got_bytes = _both(world, str(mpi_tmp_path), backend, f"darray-{case}", write, read)
        assert want == got and want_bytes == got_bytes

    run_on_all_ranks(world, check)


@pytest.mark.parametrize("backend", LOCAL_BACKENDS)
def test_get_view_returns_datatypes_the_caller_frees_as_in_open_mpi(world, mpi_tmp_path, backend):
    """MPI_File_get_view returns new handles of derived datatypes, which MPI programs free:
    hpcbridge returned the view's own copies, so the next Get_view failed (ERR_TYPE) and nothing
    was written."""
    from mpi4py import MPI

    def views(f, comm):
        seen = []
        for k in range(2):
            disp, etype, filetype, datarep = f.Get_view()
            seen.append((disp, etype.Get_size(), filetype.Get_size(), filetype.Get_extent(), datarep))
            for t in (etype, filetype):
                if not t.is_predefined:
                    t.Free()
        return seen

    def write(f, comm):
        etype = MPI.INT.Create_contiguous(1).Commit()
        filetype = MPI.INT.Create_vector(2, 1, comm.size).Create_resized(0, 8 * comm.size).Commit()
        f.Set_view(4 * comm.rank, etype, filetype)
        etype.Free()
        filetype.Free()
        views(f, comm)
        f.Write_all(np.arange(3, dtype=np.int32) + 10 * comm.rank)
        pair = MPI.INT.Create_contiguous(2).Commit()
        f.Set_view(0, pair)  # the filetype is the etype: Get_view gives two handles
        pair.Free()
        views(f, comm)

    def read(f, comm):
        f.Set_view(0, MPI.INT)
        return views(f, comm)

    def check():
        want, got, want_bytes, got_bytes = _both(world, str(mpi_tmp_path), backend, "get-view", write, read)
        assert want == got and want_bytes == got_bytes

    run_on_all_ranks(world, check)


def test_a_store_of_one_process_is_refused_for_several_ranks(world, tmp_path_factory):
    """memory:// lives in each process: ranks opening "one" file there would each get their own
    (ranks above 0 failed with a FileNotFoundError naming nothing of this). Refused on every rank
    with the reason; alone (COMM_SELF) it works, as on any backend."""
    import io

    from mpi4py import MPI

    url = f"memory://oracle-edges-{os.getpid()}"
    for backend in (f"{url}/one.bin", f"plfs+{url}/two.bin"):
        if world.size > 1:
            with pytest.raises(io.UnsupportedOperation, match="live in one process"):
                File.Open(world, backend, MPI.MODE_WRONLY | MPI.MODE_CREATE)
        f = File.Open(MPI.COMM_SELF, backend, MPI.MODE_WRONLY | MPI.MODE_CREATE)
        try:
            f.Write_at(0, b"alone")
        finally:
            f.Close()
        assert hpcbridge.open(backend, "rb").read() == b"alone"


@pytest.mark.parametrize("backend", LOCAL_BACKENDS)
def test_get_errhandler_returns_a_handle_the_caller_frees_as_in_open_mpi(world, mpi_tmp_path, backend):
    """MPI_File_get_errhandler returns a new reference, which MPI programs free: hpcbridge gave
    out the predefined ``MPI.ERRORS_RETURN`` object itself, whose Free() released a reference
    Open MPI never gave (free(): invalid pointer, the job aborted at finalisation)."""
    from mpi4py import MPI

    def handles(f, comm):
        seen = []
        for k in range(2):
            errhandler = f.Get_errhandler()
            # Freeing the predefined object itself would corrupt the process: check it first.
            assert errhandler is not MPI.ERRORS_RETURN
            seen.append(errhandler == MPI.ERRORS_RETURN)
            errhandler.Free()
            seen.append(errhandler == MPI.ERRHANDLER_NULL)
        f.Set_errhandler(MPI.ERRORS_RETURN)
        return seen

    def write(f, comm):
        handles(f, comm)
        f.Write_at_all(comm.rank, np.full(1, comm.rank, dtype=np.uint8))

    def check():
        want, got, want_bytes, got_bytes = _both(world, str(mpi_tmp_path), backend, "get-errhandler", write,
                                                 handles)
        assert want == got == [True, True, True, True] and want_bytes == got_bytes

    run_on_all_ranks(world, check)


def test_a_second_split_collective_begin_raises_err_request_as_in_open_mpi(world, mpi_tmp_path):
    """A split collective begun while another is active (MPI: erroneous): Open MPI raises
    ERR_REQUEST, hpcbridge raised ERR_ARG. The first one still completes, on both."""
    from mpi4py import MPI

    def write(f, comm):
        buf = np.full(4, comm.rank + 1, dtype=np.uint8)
        f.Write_at_all_begin(4 * comm.rank, buf)
        try:
            f.Write_at_all_begin(4 * comm.rank + 4 * comm.size, buf)
            error = None
        except MPI.Exception as exc:
            error = MPI.Get_error_string(exc.Get_error_class()).split(":")[0]
        f.Write_at_all_end(buf)
        write.errors.append(error)

    def check():
        write.errors = []
        _, _, want_bytes, got_bytes = _both(world, str(mpi_tmp_path), "posix", "split-twice", write)
        assert write.errors == ["MPI_ERR_REQUEST", "MPI_ERR_REQUEST"] and want_bytes == got_bytes

    run_on_all_ranks(world, check)


@pytest.mark.parametrize("backend", LOCAL_BACKENDS)
def test_sync_of_a_read_only_file_is_err_access_as_in_open_mpi(world, mpi_tmp_path, backend):
    """Open MPI's MPI_File_sync refuses a file opened MODE_RDONLY (ERR_ACCESS, with the default
    error handler or ERRORS_RETURN set on the file; ERRORS_ARE_FATAL aborts, which hpcbridge
    does not offer), and the file stays usable; hpcbridge synced it. Write-only and read-write
    files sync on both."""
    from mpi4py import MPI

    def sync(f, errhandler):
        if errhandler:
            f.Set_errhandler(MPI.ERRORS_RETURN)
        try:
            outcome = f.Sync()
        except MPI.Exception as exc:
            outcome = MPI.Get_error_string(exc.Get_error_class()).split(":")[0]
        return outcome, f.Get_size()

    def check():
        directory = str(mpi_tmp_path)
        # (amode, a file made first?): PLFS handles read or write, and rewrite files whole.
        amodes = [(MPI.MODE_RDONLY, True), (MPI.MODE_WRONLY | MPI.MODE_CREATE, False)]
        if backend == "posix":
            amodes.append((MPI.MODE_RDWR | MPI.MODE_CREATE, False))
        results = []
        for side, opener in (("ompi", MPI.File.Open), ("hb", File.Open)):
            seen = []
            for k, (amode, made) in enumerate(amodes):
                for errhandler in (False, True):
                    name = f"sync-{k}-{errhandler:d}"
                    oracle = os.path.join(directory, f"{name}.ompi")
                    url, options = backend_url(backend, directory, name)
                    where, extra = (oracle, {}) if side == "ompi" else (url, options)
                    if made:
                        f = opener(world, where, MPI.MODE_WRONLY | MPI.MODE_CREATE, **extra)
                        f.Write_at(world.rank, _fill(1, world.rank))
                        f.Close()
                    f = opener(world, where, amode, **extra)
                    try:
                        seen.append(sync(f, errhandler))
                    finally:
                        f.Close()
                    world.Barrier()
                    if world.rank == 0:
                        if side == "ompi":
                            os.remove(oracle)
                        else:
                            fs, path = hpcbridge.url_to_fs(url, **options)
                            fs.rm(path, recursive=True)
                    world.Barrier()
            results.append(seen)
        assert results[1] == results[0], results
        assert results[0][:2] == [("MPI_ERR_ACCESS", world.size)] * 2

    run_on_all_ranks(world, check)


#: The split collectives: ``(stem, reads?)``.
SPLITS = [("Write_at_all", False), ("Write_all", False), ("Write_ordered", False),
          ("Read_at_all", True), ("Read_all", True), ("Read_ordered", True)]


@pytest.mark.parametrize("backend", LOCAL_BACKENDS)
def test_split_collective_ends_return_none_and_fill_status_as_mpi4py(world, mpi_tmp_path, backend):
    """mpi4py's ``*_end`` return None, the byte count is in ``status``; hpcbridge's returned
    the count. Each call, with a status and without, moves two INTs per rank in its own region
    (reads stay before end of file: Open MPI 4.1's split reads that find no byte never end)."""
    from mpi4py import MPI

    def split(f, comm, reads):
        seen = []
        calls = [(stem, status) for stem, r in SPLITS if r == reads for status in (True, False)]
        for k, (stem, status) in enumerate(calls):
            region = 8 * comm.size * k
            buf = np.zeros(2, np.int32) if reads else np.full(2, 100 * k + comm.rank, np.int32)
            args = (buf,)
            if "_at_" in stem:
                args = (region + 8 * comm.rank, buf)
            elif "ordered" in stem:
                f.Seek_shared(region)
            else:
                f.Seek(region + 8 * comm.rank)
            getattr(f, stem + "_begin")(*args)
            st = MPI.Status() if status else None
            returned = getattr(f, stem + "_end")(buf, *([st] if status else []))
            counts = (st.Get_count(MPI.BYTE), st.Get_count(MPI.INT)) if status else None
            seen.append((stem, returned, counts, buf.tolist()))
        return seen

    def check():
        writes = []
        want, got, want_bytes, got_bytes = _both(world, str(mpi_tmp_path), backend, "split-end",
                                                 lambda f, comm: writes.append(split(f, comm, False)),
                                                 lambda f, comm: split(f, comm, True))
        assert writes[1] == writes[0] and want == got and want_bytes == got_bytes, (writes, want, got)
        assert {returned for _, returned, _, _ in writes[0] + want} == {None}
        assert {counts for _, _, counts, _ in writes[0] + want} == {(8, 2), None}

    run_on_all_ranks(world, check)


def test_set_view_with_datarep_none_is_native_as_in_mpi4py(world, mpi_tmp_path):
    """mpi4py's Set_view takes ``datarep=None`` as "native"; hpcbridge raised
    NotImplementedError (ERR_UNSUPPORTED_DATAREP)."""
    from mpi4py import MPI

    def check():
        seen = []
        for opener, where in ((MPI.File.Open, os.path.join(str(mpi_tmp_path), "datarep.ompi")),
                              (File.Open, f"file://{mpi_tmp_path}/datarep.hb")):
            f = opener(world, where, MPI.MODE_RDWR | MPI.MODE_CREATE)
            try:
                f.Set_view(4, MPI.BYTE, None, None)
                seen.append((f.Get_view()[0], f.Get_view()[3], f.Get_byte_offset(2)))
            finally:
                f.Close()
        assert seen[1] == seen[0] == (4, "native", 6)

    run_on_all_ranks(world, check)
