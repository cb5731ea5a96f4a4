"""Differential tests: hpcbridge.mpi.File against Open MPI's MPI.File, the oracle.

Hypothesis (on rank 0; every rank follows, see ``collective_examples``) draws short programs of
mpi4py File calls — ``Set_view`` in its 1-, 2- and 3-argument forms with BYTE, INT and DOUBLE
etypes and contiguous, vector, hvector, indexed, hindexed, subarray (C and Fortran), struct and
resized filetypes at non-zero displacements; ``Seek`` (SET, CUR, END), ``Get_position``,
``Write``/``Read``, ``Write_at``/``Read_at``, the collective ``*_all`` calls with uneven and
zero-length contributions, the non-blocking and split-collective forms, ``Set_size``,
``Get_size``, ``Preallocate``, ``Sync``, ``Get_byte_offset``, reads past the end of file, and
the shared-pointer calls (``Write_ordered``, ``Read_ordered``, ``Write_shared``,
``Read_shared``, ``Seek_shared``, ``Get_position_shared``). Each program runs, call by call with
the same arguments, on ``MPI.File`` and on ``hpcbridge.mpi.File`` over POSIX and PLFS on POSIX
(PLFS on a real HDFS in ``test_plfs_hdfs``), on 1 to 4 ranks: the files must be byte-identical
and every call must return the same bytes, counts and positions.

Ranks write disjoint bytes (views shifted per rank), and the programs put a barrier after every
call, so that what each rank reads is defined. Shrunk failures found by the harness are kept as
explicit regression tests at the end of this module.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import strategies as st

import hpcbridge
from hpcbridge.mpi import File

from .test_collective_mpi import examples_on_first_ranks

pytestmark = pytest.mark.mpi(min_size=1)

BASE_SIZES = {"BYTE": 1, "INT": 4, "DOUBLE": 8}
DTYPES = {"BYTE": np.uint8, "INT": np.int32, "DOUBLE": np.float64}
SENTINEL = 0xEE
RANK_GAP = 1 << 16  # bytes between ranks' regions when views are shifted by displacement


# -- datatypes -------------------------------------------------------------------------------
def build_type(spec, base, MPI):
    """The MPI datatype (uncommitted) of ``spec`` over the named type ``base``."""
    kind = spec[0]
    if kind == "named":
        return base.Dup()
    if kind == "contiguous":
        child = build_type(spec[2], base, MPI)
        try:
            return child.Create_contiguous(spec[1])
        finally:
            child.Free()
    if kind == "vector":
        child = build_type(spec[4], base, MPI)
        try:
            return child.Create_vector(spec[1], spec[2], spec[3])
        finally:
            child.Free()
    if kind == "hvector":
        child = build_type(spec[4], base, MPI)
        try:
            return child.Create_hvector(spec[1], spec[2], spec[3] + spec[2] * child.Get_extent()[1])
        finally:
            child.Free()
    if kind == "indexed":
        return base.Create_indexed(spec[1], spec[2])
    if kind == "hindexed":
        return base.Create_hindexed(spec[1], spec[2])
    if kind == "subarray":
        _, sizes, subsizes, starts, order = spec
        return base.Create_subarray(sizes, subsizes, starts, order=MPI.ORDER_C if order == "C" else MPI.ORDER_F)
    if kind == "struct":
        blocks, displs = spec[1], spec[2]
        return MPI.Datatype.Create_struct(blocks, displs, [base] * len(blocks))
    if kind == "resized":
        child = build_type(spec[3], base, MPI)
        try:
            true_lb, true_extent = child.Get_true_extent()
            lb = min(spec[1], true_lb)
            return child.Create_resized(lb, true_lb + true_extent - lb + spec[2])
        finally:
            child.Free()
    raise AssertionError(spec)


def _gapped(draw, n, unit, max_gap=3):
    """``n`` increasing non-overlapping (blocklength, displacement) pairs in ``unit`` steps."""
    blocks = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    gaps = draw(st.lists(st.integers(0, max_gap), min_size=n, max_size=n))
    displs, position = [], 0
    for b, g in zip(blocks, gaps):
        position += g * unit
        displs.append(position)
        position += b * unit
    return blocks, displs


@st.composite
def type_specs(draw, base_size, depth=0):
    kinds = ["named", "contiguous", "vector", "hvector", "indexed", "hindexed", "subarray", "struct", "resized"]
    kind = draw(st.sampled_from(kinds if depth < 2 else ["named", "vector", "indexed", "subarray"]))
    child = (lambda: draw(type_specs(base_size, depth + 1))) if depth < 1 else (lambda: ("named",))
    if kind == "named":
        return ("named",)
    if kind == "contiguous":
        return ("contiguous", draw(st.integers(1, 3)), child())
    if kind == "vector":
        count, bl = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        return ("vector", count, bl, bl + draw(st.integers(0, 3)), child())
    if kind == "hvector":  # stride in bytes past the block: any byte gap
        return ("hvector", draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(0, 9)), child())
    if kind == "indexed":
        blocks, displs = _gapped(draw, draw(st.integers(1, 3)), 1)
        return ("indexed", blocks, displs)
    if kind == "hindexed":
        n = draw(st.integers(1, 3))
        blocks = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
        displs, position = [], 0
        for b in blocks:
            position += draw(st.integers(0, 7))
            displs.append(position)
            position += b * base_size
        return ("hindexed", blocks, displs)
    if kind == "subarray":
        ndims = draw(st.integers(1, 3))
        sizes = draw(st.lists(st.integers(1, 4), min_size=ndims, max_size=ndims))
        subsizes = [draw(st.integers(1, s)) for s in sizes]
        starts = [draw(st.integers(0, s - ss)) for s, ss in zip(sizes, subsizes)]
        return ("subarray", sizes, subsizes, starts, draw(st.sampled_from(["C", "F"])))
    if kind == "struct":
        n = draw(st.integers(1, 3))
        blocks = draw(st.lists(st.integers(1, 2), min_size=n, max_size=n))
        displs, position = [], 0
        for b in blocks:
            position += draw(st.integers(0, 6))
            displs.append(position)
            position += b * base_size
        return ("struct", blocks, displs)
    return ("resized", draw(st.sampled_from([0, 0, 1, 4, 16])), draw(st.integers(0, 12)), child())


# -- programs ---------------------------------------------------------------------------------
def per_rank(strategy, P):
    return st.lists(strategy, min_size=P, max_size=P)


@st.composite
def views(draw, P, shared=False):
    etype = draw(st.sampled_from(["BYTE", "INT", "DOUBLE"]))
    form = draw(st.sampled_from([1, 2, 3, 3])) if not shared else draw(st.sampled_from([1, 2, 3]))
    if form == 1:
        etype = "BYTE"
    disp = draw(st.sampled_from([0, 3, 8, 100, 4096]))
    spec = draw(type_specs(BASE_SIZES[etype])) if form == 3 else None
    # How ranks stay apart: a per-rank displacement, or (filetypes) interleaved tiles.
    placement = "common" if shared else ("shift" if form < 3 or P == 1 else draw(st.sampled_from(["shift", "tile"])))
    return {"op": "view", "form": form, "etype": etype, "disp": disp, "spec": spec, "placement": placement,
            "info": draw(st.booleans())}


def counts(P, hi=12):
    return per_rank(st.integers(0, hi), P)


BUF_FORMS = ["array", "array", "typed", "counted", "bytes"]


@st.composite
def io_ops(draw, P, mode, shared):
    """One call of the program."""
    writes, reads = "w" in mode, "r" in mode
    kinds = ["seek", "get_position", "byte_offset"]
    if writes:
        kinds += ["write_at", "write_at", "write", "write", "write_at_all", "write_at_all", "write_all",
                  "iwrite_at", "iwrite_at_all", "write_at_all_split", "write_all_split", "sync"]
    if reads:
        kinds += ["read_at", "read_at", "read", "read_at_all", "read_all", "iread_at", "iread_all",
                  "read_at_all_split", "get_size"]
    if writes and reads:
        kinds += ["set_size", "preallocate", "get_size"]
    if shared:
        kinds = ["get_position_shared", "seek_shared"]
        if writes:
            kinds += ["write_ordered", "write_ordered", "write_shared", "write_ordered_split", "iwrite_shared"]
        if reads:
            kinds += ["read_ordered", "read_shared", "read_ordered_split", "iread_shared", "get_size"]
    kind = draw(st.sampled_from(kinds))
    op = {"op": kind, "snake": draw(st.booleans()), "buf": draw(st.sampled_from(BUF_FORMS))}
    if kind in ("seek", "seek_shared"):
        # Shared-pointer writers only move forward: back, one rank would overwrite another's
        # bytes, which MPI leaves undefined without sync-barrier-sync.
        forward = kind == "seek_shared" and writes
        op["whence"] = draw(st.sampled_from(["SEEK_CUR", "SEEK_END"] if forward else ["SEEK_SET", "SEEK_CUR", "SEEK_END"]))
        op["offset"] = draw(st.integers(0, 20))
        if kind == "seek":
            op["offsets"] = draw(per_rank(st.integers(0, 20), P))
    elif kind == "byte_offset":
        op["offsets"] = draw(per_rank(st.integers(0, 30), P))
    elif kind in ("set_size", "preallocate"):
        op["size"] = draw(st.sampled_from([0, 1, 17, 200, 5000, 70000]))
    elif kind in ("write_shared", "read_shared", "iwrite_shared", "iread_shared"):
        op["who"] = draw(st.integers(0, P - 1))
        op["counts"] = draw(counts(P))
    elif kind not in ("sync", "get_size", "get_position", "get_position_shared"):
        op["counts"] = draw(counts(P))
        if "_at" in kind:
            op["offsets"] = draw(per_rank(st.integers(0, 40), P))
    return op


@st.composite
def programs(draw, P, phased=None):
    """``{"P", "phases": [{"mode", "ops"}], "seed"}``: one read-write phase, or a write-only
    phase then a read-only one (the PLFS way: write-only or read-only handles)."""
    if phased is None:
        phased = draw(st.booleans())
    shared = draw(st.integers(0, 3)) == 0
    modes = ["w", "r"] if phased else ["rw"]
    phases = []
    for mode in modes:
        ops = []
        for _ in range(draw(st.integers(1, 3))):
            ops.append(draw(views(P, shared)))
            ops.extend(draw(st.lists(io_ops(P, mode, shared), min_size=1, max_size=5)))
        phases.append({"mode": mode, "ops": ops})
    return {"P": P, "phases": phases, "seed": draw(st.integers(0, 2**31 - 1))}


# -- running a program ------------------------------------------------------------------------
class Runner:
    """Runs a program's calls on one file object (``MPI.File`` or ``hpcbridge.mpi.File``)."""

    def __init__(self, f, comm, program, hpcbridge_side):
        from mpi4py import MPI

        self.MPI = MPI
        self.f, self.comm, self.program = f, comm, program
        self.hpcbridge = hpcbridge_side
        self.rank, self.P = comm.rank, comm.size
        self.etype = "BYTE"
        self.holes = False  # the view's filetype leaves gaps between data bytes
        self.views = 0
        self.disp = 0
        self.types = []

    def call(self, name, snake, *args):
        method = getattr(self.f, name.lower() if snake and self.hpcbridge else name)
        return method(*args)

    def data(self, index, count):
        """Data of write number ``index`` on this rank: ``count`` etypes of random bytes."""
        size = count * BASE_SIZES[self.etype]
        rng = np.random.default_rng([self.program["seed"], index, self.rank])
        return rng.integers(0, 256, size, dtype=np.uint8).view(DTYPES[self.etype])

    def spec(self, array, form, writable):
        MPI = self.MPI
        dt = getattr(MPI, self.etype)
        if form == "typed":
            return [array, dt]
        if form == "counted":
            padded = np.concatenate([array, np.zeros(2, dtype=array.dtype)]) if not writable else \
                np.full(array.size + 2, 0, dtype=array.dtype)
            if writable:
                padded.view(np.uint8)[:] = SENTINEL
            return [padded, array.size, dt], padded
        if form == "bytes" and not writable:
            return array.tobytes()
        return array

    def close_types(self):
        for t in self.types:
            t.Free()
        self.types = []

    def run(self, ops, phase):
        results = []
        for index, op in enumerate(ops):
            if os.environ.get("HB_DIFF_DEBUG"):
                with open(f"{os.environ['HB_DIFF_DEBUG']}.{self.rank}", "a") as log:
                    print(self.hpcbridge, op, file=log)
            try:
                results.append((op["op"], self.run_op(op, 1000 * phase + index)))
            except Exception as exc:  # recorded: both sides must fail alike
                results.append((op["op"], ("error", type(exc).__name__ if self.hpcbridge else "any")))
                self.comm.Barrier()
                return results
            self.comm.Barrier()
        return results

    def run_view(self, op):
        MPI = self.MPI
        self.etype = op["etype"]
        self.holes = False
        base = getattr(MPI, op["etype"])
        # The k-th view of a phase works in region k of the file (P·RANK_GAP bytes), so no two
        # ranks write the same byte within one open: MPI leaves such conflicting writes undefined
        # without sync-barrier-sync, and PLFS orders overlapping writes per writer only.
        disp = op["disp"] + self.views * self.P * RANK_GAP
        self.views += 1
        if op["placement"] == "shift":
            disp += self.rank * RANK_GAP
        self.disp = disp
        info = MPI.Info.Create() if op["info"] else None
        if info is not None:
            info.Set("cb_buffer_size", "65536")
        try:
            if op["form"] == 1:
                self.call("Set_view", False, disp)
            elif op["form"] == 2:
                self.call("Set_view", False, disp, base)
            else:
                filetype = build_type(op["spec"], base, MPI)
                if op["placement"] == "tile":
                    lb, extent = filetype.Get_extent()
                    true_lb, true_extent = filetype.Get_true_extent()
                    step = max(lb + extent, true_lb + true_extent)
                    placed = MPI.Datatype.Create_struct([1], [self.rank * step], [filetype])
                    filetype.Free()
                    filetype = placed.Create_resized(0, self.P * step)
                    placed.Free()
                filetype.Commit()
                self.types.append(filetype)
                self.holes = filetype.Get_size() != filetype.Get_extent()[1] or \
                    filetype.Get_true_extent() != filetype.Get_extent()
                if info is not None:
                    self.call("Set_view", False, disp, base, filetype, "native", info)
                else:
                    self.call("Set_view", False, disp, base, filetype)
        finally:
            if info is not None:
                info.Free()
        return None

    def run_op(self, op, index):
        MPI = self.MPI
        kind = op["op"]
        rank = self.rank
        if kind == "view":
            return self.run_view(op)
        snake = op.get("snake", False)
        if kind == "seek_shared" and op["whence"] == "SEEK_END" and self.disp:
            # Open MPI 4.1's Seek_shared(off, SEEK_END) sets the pointer to file size + off
            # ignoring the view's displacement (4096 + 35 bytes, disp 4096: position 4135, past
            # the end of the data): no oracle there either.
            op = dict(op, whence="SEEK_CUR")
        if kind in ("seek", "seek_shared") and op["whence"] == "SEEK_END" and self.holes:
            # Open MPI 4.1's SEEK_END in a view with holes is not the end of the view's data (on
            # a 40-byte file with a vector(2, 1, 3) byte filetype, a write after Seek(0,
            # SEEK_END) lands at byte 23): no oracle there, the harness seeks from the start
            # (the shared pointer from where it is, see io_ops).
            op = dict(op, whence="SEEK_SET" if kind == "seek" else "SEEK_CUR")
        if kind == "seek":
            whence = getattr(MPI, op["whence"])
            self.call("Seek", snake, op["offsets"][rank], whence)
            return self.f.Get_position()
        if kind == "seek_shared":
            self.call("Seek_shared", snake, op["offset"], getattr(MPI, op["whence"]))
            return self.f.Get_position_shared()
        if kind == "get_position":
            return self.call("Get_position", snake)
        if kind == "get_position_shared":
            return self.call("Get_position_shared", snake)
        if kind == "get_size":
            return self.call("Get_size", snake)
        if kind == "byte_offset":
            return self.call("Get_byte_offset", snake, op["offsets"][rank])
        if kind == "sync":
            self.call("Sync", snake)
            return None
        if kind in ("set_size", "preallocate"):
            self.call("Set_size" if kind == "set_size" else "Preallocate", snake, op["size"])
            return self.f.Get_size()
        count = op["counts"][rank]
        who = op.get("who")
        if who is not None and who != rank:
            return None
        status = MPI.Status()
        name = {"write_at": "Write_at", "write": "Write", "write_at_all": "Write_at_all", "write_all": "Write_all",
                "read_at": "Read_at", "read": "Read", "read_at_all": "Read_at_all", "read_all": "Read_all",
                "write_ordered": "Write_ordered", "read_ordered": "Read_ordered", "write_shared": "Write_shared",
                "read_shared": "Read_shared"}.get(kind)
        offset_args = (op["offsets"][rank],) if "offsets" in op else ()
        if kind.startswith(("write", "iwrite")):
            data = self.data(index, count)
            buf = self.spec(data, op["buf"], writable=False)
            buf = buf[0] if isinstance(buf, tuple) else buf
            if name:
                self.call(name, snake, *offset_args, buf, status)
            elif kind.startswith("iwrite"):
                req = self.call({"iwrite_at": "Iwrite_at", "iwrite_at_all": "Iwrite_at_all",
                                 "iwrite_shared": "Iwrite_shared"}[kind], snake, *offset_args, buf)
                req.Wait(status)
            else:  # split collective
                stem = {"write_at_all_split": "Write_at_all", "write_all_split": "Write_all",
                        "write_ordered_split": "Write_ordered"}[kind]
                self.call(stem + "_begin", snake, *offset_args, buf)
                self.call(stem + "_end", snake, buf, status)
            return ("wrote", status.Get_count(MPI.BYTE), self.position())
        # reads
        out = np.zeros(count, dtype=DTYPES[self.etype])
        out.view(np.uint8)[:] = SENTINEL
        spec = self.spec(out, op["buf"], writable=True)
        target = out
        if isinstance(spec, tuple):
            spec, target = spec
        if not name and not self.hpcbridge:
            # Open MPI 4.1's non-blocking reads (and the split collectives built on them) never
            # complete when they find no byte before end of file: the oracle runs the blocking
            # call, whose semantics MPI defines to be the same.
            name = ONE_CALL_READS[kind]
        if name:
            self.call(name, snake, *offset_args, spec, status)
        elif kind.startswith("iread"):
            req = self.call({"iread_at": "Iread_at", "iread_all": "Iread_all", "iread_shared": "Iread_shared"}[kind],
                            snake, *offset_args, spec)
            req.Wait(status)
        else:
            stem = {"read_at_all_split": "Read_at_all", "read_ordered_split": "Read_ordered"}[kind]
            self.call(stem + "_begin", snake, *offset_args, spec)
            self.call(stem + "_end", snake, spec, status)
        n = status.Get_count(MPI.BYTE)
        return ("read", n, target.view(np.uint8)[:n].tobytes(), self.position())

    def position(self):
        return self.f.Get_position()


#: The blocking call with the semantics of each non-blocking or split-collective read.
ONE_CALL_READS = {"iread_at": "Read_at", "iread_all": "Read_all", "iread_shared": "Read_shared",
                  "read_at_all_split": "Read_at_all", "read_ordered_split": "Read_ordered"}


def run_program(comm, program, open_file, hpcbridge_side):
    """Results of every call of every phase, on this rank."""
    results = []
    for number, phase in enumerate(program["phases"]):
        f = open_file(phase["mode"])
        runner = Runner(f, comm, program, hpcbridge_side)
        try:
            results.append(runner.run(phase["ops"], number))
        finally:
            f.Close()
            runner.close_types()
    return results


def oracle_opener(comm, path):
    from mpi4py import MPI

    amodes = {"w": MPI.MODE_WRONLY | MPI.MODE_CREATE, "rw": MPI.MODE_RDWR | MPI.MODE_CREATE, "r": MPI.MODE_RDONLY}
    return lambda mode: MPI.File.Open(comm, path, amodes[mode])


def hpcbridge_opener(comm, url, **options):
    modes = {"w": "w", "rw": "w+", "r": "r"}
    return lambda mode: File.open(comm, url, modes[mode], **options)


def backend_url(backend, directory):
    if backend == "posix":
        return f"file://{directory}/hpcbridge"
    if backend == "plfs-posix":
        return f"plfs+file://{directory}/hpcbridge"
    return f"{backend}{directory}/hpcbridge"


def compare(comm, program, oracle_path, url, options=None):
    """Run ``program`` on the oracle (a file at ``oracle_path``) and on hpcbridge at ``url``;
    the same verdict on every rank (None when all results and both files are identical)."""
    options = options or {}
    expected = run_program(comm, program, oracle_opener(comm, oracle_path), False)
    got = run_program(comm, program, hpcbridge_opener(comm, url, **options), True)
    problems = []
    for phase, (want_phase, got_phase) in enumerate(zip(expected, got)):
        for index, (want, have) in enumerate(zip(want_phase, got_phase)):
            if isinstance(want[1], tuple) and want[1][0] == "error":
                if not (isinstance(have[1], tuple) and have[1][0] == "error"):
                    problems.append(f"rank {comm.rank} phase {phase} call {index} {want[0]}: Open MPI raised, "
                                    f"hpcbridge returned {_short(have[1])}")
                break
            if want != have and not _eof_count_of_open_mpi(want, have):
                problems.append(f"rank {comm.rank} phase {phase} call {index} {want[0]}: Open MPI {_short(want[1])}, "
                                f"hpcbridge {_short(have[1])}")
                break
    if comm.rank == 0:
        with open(oracle_path, "rb") as f:
            want_bytes = f.read()
        fs, path = hpcbridge.url_to_fs(url, **options)
        with fs.open(path, "rb") as f:
            got_bytes = f.read()
        if want_bytes != got_bytes:
            diff = next((i for i, (a, b) in enumerate(zip(got_bytes, want_bytes)) if a != b),
                        min(len(got_bytes), len(want_bytes)))
            problems.append(f"{url}: file differs from Open MPI's: sizes {len(got_bytes)} vs {len(want_bytes)}, "
                            f"first difference at byte {diff}")
        os.remove(oracle_path)
        fs.rm(path, recursive=True)
    comm.Barrier()
    everyone = comm.allgather(problems)
    flat = [p for ps in everyone for p in ps]
    return "; ".join(flat) if flat else None


#: Collective reads whose status count Open MPI sets to the bytes asked for, also past the end of
#: file (its fcoll components, like ROMIO, report the request), where the MPI standard and
#: hpcbridge report the bytes actually read. Independent reads agree on the count.
COLLECTIVE_READS = {"read_at_all", "read_all", "iread_all", "read_at_all_split", "read_ordered", "read_ordered_split"}


def _eof_count_of_open_mpi(want, have) -> bool:
    """True when a collective read differs only by Open MPI's count past the end of file: the
    same bytes up to hpcbridge's count, and Open MPI left the rest of the buffer untouched or
    zeroed (its collective buffers are zero-filled past the end of file)."""
    if want[0] not in COLLECTIVE_READS or not isinstance(want[1], tuple) or not isinstance(have[1], tuple):
        return False
    _, n_want, data_want, pos_want = want[1]
    _, n_have, data_have, pos_have = have[1]
    return (n_have < n_want and pos_want == pos_have and data_want[:n_have] == data_have
            and set(data_want[n_have:]) <= {SENTINEL, 0})


def _short(value):
    text = repr(value)
    return text if len(text) < 200 else text[:200] + "..."


def make_check(directory, backends, options=None):
    def factory(comm):
        def check(program):
            verdicts = []
            for backend in backends:
                if "plfs" in backend and program["phases"][0]["mode"] == "rw":
                    continue  # PLFS handles are write-only or read-only
                verdict = compare(comm, program, os.path.join(directory, "oracle"), backend_url(backend, directory),
                                  options)
                if verdict:
                    verdicts.append(verdict)
            if verdicts and os.environ.get("HB_DIFF_DEBUG") and comm.rank == 0:
                with open(f"{os.environ['HB_DIFF_DEBUG']}.failures", "a") as log:
                    print("; ".join(verdicts), program, sep="\n", file=log)
            return "; ".join(verdicts) + f"\nprogram: {program!r}" if verdicts else None
        return check
    return factory


def shared_directory(world, mpi_tmp_path):
    return world.bcast(str(mpi_tmp_path) if world.rank == 0 else None, root=0)


@pytest.fixture
def world():
    from mpi4py import MPI

    return MPI.COMM_WORLD


@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_differential_posix_and_plfs(world, mpi_tmp_path, nranks):
    directory = shared_directory(world, mpi_tmp_path)
    examples_on_first_ranks(world, nranks, programs(nranks), make_check(directory, ["posix", "plfs-posix"]),
                            max_examples=12)


def test_differential_plfs_hdfs(world, mpi_tmp_path, backing):
    url, webhdfs = backing["hdfs"]
    directory = shared_directory(world, mpi_tmp_path)
    backend = url.replace("hdfs://", "plfs+hdfs://") + "/differential"
    nranks = min(3, world.size)
    examples_on_first_ranks(world, nranks, programs(nranks, phased=True),
                            make_check(directory, [backend], {"webhdfs": webhdfs}), max_examples=3)
