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
explicit regression tests at the end of this module. To debug, set ``HB_DIFF_DEBUG=/some/prefix``
(``mpirun -x HB_DIFF_DEBUG``): each rank logs the calls it runs to ``prefix.<rank>`` and rank 0
every failing program, before shrinking, to ``prefix.failures``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import strategies as st

from hpcbridge.mpi import File

from .conftest import backend_url, directory_for, make_directory, take_files
from .test_collective_mpi import examples_on_first_ranks

pytestmark = pytest.mark.mpi(min_size=1)

BASE_SIZES = {"BYTE": 1, "INT": 4, "DOUBLE": 8}
DTYPES = {"BYTE": np.uint8, "INT": np.int32, "DOUBLE": np.float64}
SENTINEL = 0xEE
RANK_GAP = 1 << 16  # bytes between ranks' regions when views are shifted by displacement
SEEK_END_GAP = 1024  # etypes between ranks' positions after SEEK_END (more than a phase writes)


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
    kinds = ["seek", "get_position", "byte_offset", "meta"]
    if writes:
        kinds += ["write_at", "write_at", "write", "write", "write_at_all", "write_at_all", "write_all",
                  "iwrite_at", "iwrite_at_all", "iwrite", "iwrite_all", "write_at_all_split", "write_all_split", "sync"]
    if reads:
        kinds += ["read_at", "read_at", "read", "read_at_all", "read_all", "iread_at", "iread_all", "iread",
                  "iread_at_all", "read_at_all_split", "read_all_split", "get_size"]
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
    elif kind not in ("sync", "get_size", "get_position", "get_position_shared", "meta"):
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
        self.holes = False  # the view has a derived filetype (Open MPI's SEEK_END is wrong there)
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
                # Open MPI takes its view-with-holes path for any derived filetype, a Dup of INT
                # included (SEEK_END then lands 1 etype past the start of the view).
                self.holes = True
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
            # Open MPI 4.1's SEEK_END in a view with a derived filetype is not the end of the data (on
            # a 40-byte file with a vector(2, 1, 3) byte filetype, a write after Seek(0,
            # SEEK_END) lands at byte 23): no oracle there, the harness seeks from the start
            # (the shared pointer from where it is, see io_ops).
            op = dict(op, whence="SEEK_SET" if kind == "seek" else "SEEK_CUR")
        if kind == "seek":
            whence = getattr(MPI, op["whence"])
            offset = op["offsets"][rank]
            if op["whence"] == "SEEK_END":
                # The end of file is the same byte in every rank's view: a write of two ranks
                # from there would write the same bytes (undefined in MPI; the harness found
                # such a program differing by which rank won). Ranks go apart from it.
                offset += rank * SEEK_END_GAP
            self.call("Seek", snake, offset, whence)
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
        if kind == "meta":
            group = self.call("Get_group", snake)
            try:
                return (self.call("Get_amode", snake), self.call("Get_atomicity", snake), group.Get_size(),
                        self.call("Get_type_extent", snake, getattr(MPI, self.etype)), self.call("Get_view", snake)[0])
            finally:
                group.Free()
        if kind == "byte_offset":
            return self.call("Get_byte_offset", snake, op["offsets"][rank])
        if kind == "sync":
            self.call("Sync", snake)
            return None
        if kind == "preallocate" and not self.hpcbridge:
            # Open MPI 4.1's Preallocate to the file's current size leaves a message unmatched:
            # the next collective call on the communicator reads it (mpi4py's allgather then
            # raised UnpicklingError on some ranks while the others waited: a hang). The oracle
            # makes the same file with Set_size, which extends as Preallocate does.
            current = self.comm.allreduce(self.f.Get_size(), op=MPI.MAX)
            if op["size"] > current:
                self.f.Set_size(op["size"])
            return self.f.Get_size()
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
                req = self.call({"iwrite_at": "Iwrite_at", "iwrite_at_all": "Iwrite_at_all", "iwrite": "Iwrite",
                                 "iwrite_all": "Iwrite_all", "iwrite_shared": "Iwrite_shared"}[kind],
                                snake, *offset_args, buf)
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
            req = self.call({"iread_at": "Iread_at", "iread_all": "Iread_all", "iread_shared": "Iread_shared",
                             "iread": "Iread", "iread_at_all": "Iread_at_all"}[kind], snake, *offset_args, spec)
            req.Wait(status)
        else:
            stem = {"read_at_all_split": "Read_at_all", "read_ordered_split": "Read_ordered",
                    "read_all_split": "Read_all"}[kind]
            self.call(stem + "_begin", snake, *offset_args, spec)
            self.call(stem + "_end", snake, spec, status)
        n = status.Get_count(MPI.BYTE)
        return ("read", n, target.view(np.uint8)[:n].tobytes(), self.position())

    def position(self):
        return self.f.Get_position()


#: The blocking call with the semantics of each non-blocking or split-collective read.
ONE_CALL_READS = {"iread_at": "Read_at", "iread_all": "Read_all", "iread_shared": "Read_shared", "iread": "Read",
                  "iread_at_all": "Read_at_all", "read_at_all_split": "Read_at_all", "read_all_split": "Read_all",
                  "read_ordered_split": "Read_ordered"}


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


def synced_before_seek_end(program):
    """``program`` with sync-barrier-sync before every SEEK_END of a write phase.

    A PLFS handle sees other writers' bytes (and so the file's end) after sync-barrier-sync only,
    MPI's consistency without atomicity; Open MPI on POSIX shows them at once (a rank whose
    neighbour had written 1 byte at 65536 got SEEK_END 65537 from Open MPI, 0 from hpcbridge
    on PLFS). The harness puts a barrier after every call, so two syncs make the sequence."""
    sync = {"op": "sync", "snake": False, "buf": "array"}
    phases = []
    for phase in program["phases"]:
        ops = []
        for op in phase["ops"]:
            if phase["mode"] == "w" and op["op"] in ("seek", "seek_shared") and op["whence"] == "SEEK_END":
                ops += [sync, sync]
            ops.append(op)
        phases.append(dict(phase, ops=ops))
    return dict(program, phases=phases)


def compare(comm, program, oracle_path, url, options=None):
    """Run ``program`` on the oracle (a file at ``oracle_path``) and on hpcbridge at ``url``;
    the same verdict on every rank (None when all results and both files are identical)."""
    options = options or {}
    if url.startswith("plfs+"):
        program = synced_before_seek_end(program)
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
        want_bytes, got_bytes = take_files(oracle_path, url, options)
        if want_bytes != got_bytes:
            diff = next((i for i, (a, b) in enumerate(zip(got_bytes, want_bytes)) if a != b),
                        min(len(got_bytes), len(want_bytes)))
            problems.append(f"{url}: file differs from Open MPI's: sizes {len(got_bytes)} vs {len(want_bytes)}, "
                            f"first difference at byte {diff}")
    comm.Barrier()
    everyone = comm.allgather(problems)
    flat = [p for ps in everyone for p in ps]
    return "; ".join(flat) if flat else None


#: Collective reads whose status count Open MPI sets to the bytes asked for, also past the end of
#: file (its fcoll components, like ROMIO, report the request), where the MPI standard and
#: hpcbridge report the bytes actually read. Independent reads agree on the count.
COLLECTIVE_READS = {"read_at_all", "read_all", "iread_all", "iread_at_all", "read_at_all_split", "read_all_split",
                    "read_ordered", "read_ordered_split"}


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


def make_check(directory, backends, backing=None):
    """``factory(comm)`` -> ``check(program)``: the program on Open MPI and on each backend of
    :data:`~tests.mpi.conftest.BACKENDS` named, in ``directory`` (each rank's own on COMM_SELF)."""
    def factory(comm):
        where = directory_for(comm, directory)

        def check(program):
            verdicts = []
            for backend in backends:
                if "plfs" in backend and program["phases"][0]["mode"] == "rw":
                    continue  # PLFS handles are write-only or read-only
                try:
                    url, options = backend_url(backend, where, "hpcbridge", backing)
                    verdict = compare(comm, program, os.path.join(where, "oracle"), url, options)
                except Exception as exc:  # hpcbridge raises on every rank: a verdict, not a hang
                    verdict = f"{backend}: {type(exc).__name__}: {exc}"
                if verdict:
                    verdicts.append(verdict)
            if verdicts and os.environ.get("HB_DIFF_DEBUG") and comm.rank == 0:
                with open(f"{os.environ['HB_DIFF_DEBUG']}.failures", "a") as log:
                    print("; ".join(verdicts), program, sep="\n", file=log)
            return "; ".join(verdicts) + f"\nprogram: {program!r}" if verdicts else None
        return check
    return factory


@pytest.mark.parametrize("nranks", ["self", 1, 2, 3, 4])
def test_differential_posix_and_plfs(world, mpi_tmp_path, nranks):
    examples_on_first_ranks(world, nranks, programs(1 if nranks == "self" else nranks),
                            make_check(str(mpi_tmp_path), ["posix", "plfs-posix"]), max_examples=12)


def test_differential_plfs_hdfs(world, mpi_tmp_path, backing):
    make_directory(world, "plfs-hdfs", str(mpi_tmp_path), backing)
    nranks = min(3, world.size)
    examples_on_first_ranks(world, nranks, programs(nranks, phased=True),
                            make_check(str(mpi_tmp_path), ["plfs-hdfs"], backing), max_examples=3)


# -- shrunk failures the harness found, kept as regression tests --------------------------------
def _view(form, etype, disp=0, spec=None, placement="shift"):
    return {"op": "view", "form": form, "etype": etype, "disp": disp, "spec": spec, "placement": placement,
            "info": False}


def _io(kind, counts, offsets=None, buf="array", **extra):
    op = {"op": kind, "snake": False, "buf": buf, "counts": counts, **extra}
    if offsets is not None:
        op["offsets"] = offsets
    return op


REGRESSIONS = {
    # Set_view(disp, etype): the filetype defaults to the etype (hpcbridge used the byte stream).
    "two-argument-set-view": {"P": 2, "seed": 1, "phases": [
        {"mode": "w", "ops": [_view(2, "INT", 8), _io("write_at_all", [3, 5], [1, 0]), _io("write", [2, 0])]},
        {"mode": "r", "ops": [_view(2, "INT", 8), _io("read_at", [9, 9], [0, 0])]}]},
    # A dense filetype whose typemap starts past 0 (indexed([1], [1])): refused as overlapping.
    "dense-filetype-past-zero": {"P": 1, "seed": 2, "phases": [
        {"mode": "w", "ops": [_view(3, "BYTE", 0, ("indexed", [1], [1])), _io("write", [5])]},
        {"mode": "r", "ops": [_view(3, "BYTE", 0, ("indexed", [1], [1])), _io("read_at", [7], [0])]}]},
    # Preallocate to the size the file has (the oracle's Open MPI 4.1 left a message unmatched).
    "preallocate-to-the-current-size": {"P": 4, "seed": 644, "phases": [{"mode": "rw", "ops": [
        _view(2, "INT"), {"op": "preallocate", "snake": True, "buf": "array", "size": 1},
        {"op": "preallocate", "snake": True, "buf": "array", "size": 1}]}]},
    # PLFS: after sync-barrier-sync, SEEK_END is every rank's end (a write handle reported only
    # its own: 0 where Open MPI said 65537).
    "plfs-seek-end-after-a-neighbours-write": {"P": 2, "seed": 0, "phases": [
        {"mode": "w", "ops": [
            _view(1, "BYTE"),
            {"op": "seek", "snake": False, "buf": "array", "whence": "SEEK_SET", "offset": 0, "offsets": [0, 0]},
            _io("write", [0, 1]),
            {"op": "seek", "snake": False, "buf": "array", "whence": "SEEK_END", "offset": 0, "offsets": [0, 0]}]},
        {"mode": "r", "ops": [_view(1, "BYTE")]}]},
    # SEEK_END in a 1-byte file with an INT etype: Open MPI rounds down (hpcbridge rounded up).
    "seek-end-partial-etype": {"P": 1, "seed": 3, "phases": [
        {"mode": "w", "ops": [_view(1, "BYTE"), _io("write", [1])]},
        {"mode": "r", "ops": [_view(2, "INT"), {"op": "seek", "snake": False, "buf": "array", "whence": "SEEK_END",
                                                "offset": 0, "offsets": [0]}]}]},
    # PLFS: a collective write (by the aggregators) between a rank's own independent writes to
    # the same bytes lost to the earlier one.
    "plfs-collective-between-independent": {"P": 3, "seed": 4, "phases": [
        {"mode": "w", "ops": [_view(3, "BYTE", 3, ("contiguous", 3, ("indexed", [2, 2, 2], [3, 6, 11])), "tile"),
                              _io("write_at", [12, 0, 11], [30, 25, 2]), _io("write_all", [4, 8, 11], buf="typed"),
                              _io("write_at", [3, 4, 10], [27, 29, 17]), _io("write_all", [2, 11, 2]),
                              _io("write_at", [7, 11, 1], [27, 2, 21], buf="typed")]},
        {"mode": "r", "ops": [_view(1, "BYTE", 3), _io("read_at", [40, 40, 40], [0, 0, 0])]}]},
    # Collective reads past the end of file: Open MPI counts the bytes asked and zero-fills.
    "collective-read-past-eof": {"P": 3, "seed": 5, "phases": [
        {"mode": "rw", "ops": [_view(2, "INT", 3), _io("read_at", [12, 3, 0], [2, 34, 18], buf="typed"),
                               _io("iread_all", [4, 3, 0])]}]},
    # The harness itself: after SEEK_END two ranks wrote the same byte (undefined in MPI), and the
    # files differed by which rank won.
    "seek-end-then-write-on-every-rank": {"P": 3, "seed": 1, "phases": [{"mode": "rw", "ops": [
        _view(1, "BYTE"), _io("write_at", [0, 0, 1], [0, 0, 0]),
        {"op": "seek", "snake": False, "buf": "array", "whence": "SEEK_END", "offset": 0, "offsets": [0, 0, 0]},
        _io("write", [0, 1, 1])]}]},
    # Buffer specs [buf, MPI.INT] and [buf, n, MPI.INT] (TypeError before).
    "message-buffer-specs": {"P": 2, "seed": 6, "phases": [
        {"mode": "rw", "ops": [_view(2, "INT", 0), _io("write_at_all", [4, 2], [0, 4], buf="typed"),
                               _io("write", [3, 3], buf="counted"), _io("read_at", [5, 5], [0, 1], buf="counted"),
                               {"op": "seek", "snake": True, "buf": "array", "whence": "SEEK_CUR", "offset": 0,
                                "offsets": [2, 1]}, _io("read", [4, 4], buf="typed")]}]},
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_differential_regressions(world, mpi_tmp_path, name):
    from mpi4py import MPI

    from .test_collective_mpi import split

    program = REGRESSIONS[name]
    if world.size < program["P"]:
        pytest.skip(f"needs {program['P']} ranks")
    directory = str(mpi_tmp_path)
    comm = split(world, program["P"])
    verdict = None
    try:
        if comm != MPI.COMM_NULL:
            try:
                verdict = make_check(directory, ["posix", "plfs-posix"])(comm)(program)
            finally:
                comm.Free()
    finally:
        world.Barrier()
    assert verdict is None, verdict


# -- the API: every public name of mpi4py's MPI.File -------------------------------------------
def test_every_mpi4py_file_method_exists():
    from mpi4py import MPI

    from hpcbridge.mpi.file import MPI_FILE_METHODS

    theirs = {name for name in dir(MPI.File) if not name.startswith("_")}
    missing = sorted(name for name in theirs if not hasattr(File, name))
    assert not missing, f"hpcbridge.mpi.File lacks {missing}"
    methods = {name for name in theirs if callable(getattr(MPI.File, name)) and name[0].isupper()}
    assert methods <= set(MPI_FILE_METHODS), sorted(methods - set(MPI_FILE_METHODS))
    for name in MPI_FILE_METHODS:  # the snake_case alias is the same function
        assert File.__dict__[name.lower()] is File.__dict__[name], name


# -- errors are collective ---------------------------------------------------------------------
BAD_ARGUMENTS = {
    "list-as-buffer": lambda f, rank, MPI: f.Write_at_all(0, [1, 2, 3] if rank == 1 else np.zeros(4, np.uint8)),
    "negative-offset": lambda f, rank, MPI: f.Write_at_all(-5 if rank == 2 else 0, np.zeros(4, np.uint8)),
    "negative-view-displacement": lambda f, rank, MPI: f.Set_view(-1 if rank == 0 else 0, MPI.BYTE),
    "read-into-bytes": lambda f, rank, MPI: f.Read_at_all(0, b"abcd" if rank == 1 else bytearray(4)),
    "bad-whence-shared": lambda f, rank, MPI: f.Seek_shared(0, 99 if rank == 2 else MPI.SEEK_SET),
    "partial-etype": lambda f, rank, MPI: (f.Set_view(0, MPI.INT), f.Write_all(np.zeros(3 if rank else 4, np.uint8))),
}


@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_bad_argument_on_one_rank_raises_on_all(world, mpi_tmp_path, case):
    """One rank of 3 passes a bad argument to a collective call: every rank raises (the same
    exception type), none waits forever. A watchdog thread aborts the job if a rank hangs."""
    import threading

    from mpi4py import MPI

    from .test_collective_mpi import split

    if world.size < 3:
        pytest.skip("needs 3 ranks")
    directory = str(mpi_tmp_path)
    comm = split(world, 3)
    outcome = None
    try:
        if comm != MPI.COMM_NULL:
            done = threading.Event()

            def watchdog():
                if not done.wait(60):
                    os.write(2, f"rank {world.rank}: {case} hung for 60 s\n".encode())
                    world.Abort(3)

            threading.Thread(target=watchdog, daemon=True).start()
            f = File.open(comm, f"file://{directory}/bad-{case}", "w+")
            try:
                BAD_ARGUMENTS[case](f, comm.rank, MPI)
                outcome = "returned"
            except (TypeError, ValueError) as exc:
                outcome = type(exc).__name__
            finally:
                f.Close()
                done.set()
            outcomes = comm.allgather(outcome)
            comm.Free()
            assert outcomes[0] in ("TypeError", "ValueError") and len(set(outcomes)) == 1, outcomes
    finally:
        world.Barrier()
