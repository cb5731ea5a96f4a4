"""hpcbridge.mpi.File under mpirun: collective result == independent result == reference bytes.

Access patterns and hints come from Hypothesis. Under MPI every rank must run the same examples
in the same order, so rank 0 alone runs Hypothesis (generation and shrinking) and broadcasts
each example; the other ranks follow; every check is decided collectively so all ranks agree on
pass or fail. Communicators of 1, 2, 3 and 4 ranks are split from the world (odd counts
included); backends: POSIX, PLFS on POSIX, PLFS on a real HDFS.
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import hpcbridge
from hpcbridge.mpi import File

from .conftest import LOCAL_BACKENDS, backend_url, directory_for, make_directory, run_on_all_ranks

pytestmark = pytest.mark.mpi(min_size=2)


def split(world, nranks):
    """A communicator of the first ``nranks`` world ranks (COMM_NULL on the others)."""
    from mpi4py import MPI

    return world.Split(0 if world.rank < nranks else MPI.UNDEFINED, world.rank)


def collective_examples(comm, strategy, check, max_examples):
    """Run ``check(example)`` on every rank of ``comm`` for examples rank 0 draws with Hypothesis.

    ``check`` must return the same verdict on every rank (None, or a failure message). Each
    example runs through :func:`run_on_all_ranks`: an exception on any rank fails the example on
    every rank (Hypothesis on rank 0 then shrinks it, the other ranks following), never a hang.
    """
    failure = None
    if comm.rank == 0:
        @settings(max_examples=max_examples, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate, Phase.shrink])
        @given(strategy)
        def leader(example):
            comm.bcast(("run", example), root=0)
            verdict = run_on_all_ranks(comm, check, example)
            assert verdict is None, verdict

        try:
            leader()
        except Exception as exc:  # any failure, on any rank: the followers learn it below
            failure = str(exc) if isinstance(exc, AssertionError) else f"{type(exc).__name__}: {exc}"
        comm.bcast(("stop", failure), root=0)
    else:
        while True:
            command, payload = comm.bcast(None, root=0)
            if command == "stop":
                failure = payload
                break
            try:
                run_on_all_ranks(comm, check, payload)
            except Exception:  # rank 0 got it too; Hypothesis there decides what runs next
                pass
    assert failure is None, failure


# -- patterns --------------------------------------------------------------------------------
@st.composite
def patterns(draw, nranks):
    """Disjoint file extents for each rank (random owners, lengths, holes) and hints."""
    nsegments = draw(st.integers(1, 24))
    owners = draw(st.lists(st.integers(0, nranks - 1), min_size=nsegments, max_size=nsegments))
    # Small pieces take the "placed" path (hindexed receives), large ones the vectored one.
    size = draw(st.sampled_from([3000, 40_000]))
    lengths = draw(st.lists(st.integers(1, size), min_size=nsegments, max_size=nsegments))
    holes = draw(st.lists(st.sampled_from([0, 0, 0, 1, 7, 100, 5000]), min_size=nsegments, max_size=nsegments))
    start = draw(st.sampled_from([0, 0, 13, 4096]))
    extents = [[] for _ in range(nranks)]
    position = start
    for owner, length, hole in zip(owners, lengths, holes):
        position += hole
        extents[owner].append((position, length))
        position += length
    hints = {
        "cb_buffer_size": draw(st.sampled_from([512, 4096, 10_000, 65536, 1 << 20])),
        "cb_nodes": draw(st.integers(1, nranks)),
        "cb_write": draw(st.sampled_from(["enable", "enable", "auto"])),
        "cb_read": draw(st.sampled_from(["enable", "enable", "auto"])),
        "romio_ds_write": draw(st.sampled_from(["auto", "enable", "disable"])),
        "romio_ds_read": draw(st.sampled_from(["auto", "enable", "disable"])),
    }
    if draw(st.booleans()):
        hints["striping_unit"] = draw(st.sampled_from([1, 512, 4096]))
    if draw(st.booleans()):
        hints["direct_write"] = "true"  # O_DIRECT middles, buffered heads and tails, write-behind
    return {"extents": extents, "hints": hints, "seed": draw(st.integers(0, 2**31 - 1))}


def rank_data(example, rank):
    extents = example["extents"][rank]
    total = sum(n for _, n in extents)
    return np.random.default_rng(example["seed"] + rank).integers(0, 256, total, dtype=np.uint8)


def reference_bytes(example, nranks):
    end = max((o + n for ext in example["extents"] for o, n in ext), default=0)
    out = np.zeros(end, dtype=np.uint8)
    for rank in range(nranks):
        data, position = rank_data(example, rank), 0
        for offset, length in example["extents"][rank]:
            out[offset:offset + length] = data[position:position + length]
            position += length
    return out.tobytes()


def read_whole(url, options):
    fs, path = hpcbridge.url_to_fs(url, **options)
    with fs.open(path, "rb") as f:
        return f.read()


def write_and_check(comm, example, url, options, collective: bool) -> str | None:
    """Write the example (collectively or not), read it back both ways; a verdict for all ranks."""
    from mpi4py import MPI

    rank, P = comm.rank, comm.size
    extents = example["extents"][rank]
    data = rank_data(example, rank)
    problems = []
    f = File.open(comm, url, "w", hints=example["hints"], **options)
    # A rank with nothing to write keeps the byte view and joins every collective call empty-handed.
    f.set_view(0, MPI.BYTE, extents if extents else None)
    try:
        if collective:
            f.write_at_all(0, data if extents else b"")
            plan = f.last_plan
            if plan is not None and plan.method == "aggregated":
                unit = f._exchanger.unit
                inner = plan.domain_starts[1:]
                lo, hi = plan.domain_starts[0], plan.domain_ends[-1]
                inner = inner[(inner > lo) & (inner < hi)]
                if np.any(inner % unit):
                    problems.append(f"file domains not aligned to {unit}: {plan.domain_starts.tolist()}")
        elif extents:
            f.write_at(0, data)
    finally:
        f.close()
    if rank == 0:
        got = read_whole(url, options)
        want = reference_bytes(example, P)
        if got != want:
            diff = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            problems.append(f"{'collective' if collective else 'independent'} file differs from the reference "
                            f"(sizes {len(got)} vs {len(want)}, first difference at byte {diff})")
    # Read back: collectively and independently, through the same views.
    f = File.open(comm, url, "r", hints=example["hints"], **options)
    try:
        f.set_view(0, MPI.BYTE, extents if extents else None)
        out = np.zeros_like(data)
        count = f.read_at_all(0, out if extents else bytearray(0))
        if not np.array_equal(out, data) or count != data.size:
            problems.append(f"rank {rank}: read_at_all returned other bytes (count {count} of {data.size})")
        if extents:
            out2 = np.zeros_like(data)
            f.read_at(0, out2)
            if not np.array_equal(out2, data):
                problems.append(f"rank {rank}: read_at returned other bytes")
    finally:
        f.close()
    everyone = comm.allgather(problems)
    flat = [p for ps in everyone for p in ps]
    return "; ".join(flat) if flat else None


def examples_on_first_ranks(world, nranks, strategy, make_check, max_examples):
    """:func:`collective_examples` on a communicator of the first ``nranks`` world ranks, with
    ``make_check(comm)`` as the check; every world rank meets at the end, pass or fail (a rank
    left outside would otherwise wait for ranks that went on to the next test).

    ``nranks="self"``: on COMM_SELF, every rank drawing and running the same examples alone (the
    checks must then name their files per rank: :func:`directory_for`)."""
    from mpi4py import MPI

    if nranks == "self":
        try:
            collective_examples(MPI.COMM_SELF, strategy, make_check(MPI.COMM_SELF), max_examples)
        finally:
            world.Barrier()
        return
    if world.size < nranks:
        pytest.skip(f"needs {nranks} ranks, the world has {world.size}")
    comm = split(world, nranks)
    try:
        if comm != MPI.COMM_NULL:
            try:
                collective_examples(comm, strategy, make_check(comm), max_examples)
            finally:
                comm.Free()
    finally:
        world.Barrier()


@pytest.mark.parametrize("nranks", ["self", 1, 2, 3, 4])
@pytest.mark.parametrize("where", LOCAL_BACKENDS)
def test_collective_equals_independent_equals_reference(world, mpi_tmp_path, nranks, where):
    counter = {"n": 0}

    def make_check(comm):
        directory = directory_for(comm, mpi_tmp_path)

        def check(example):
            counter["n"] += 1
            verdicts = []
            for collective in (True, False):
                url, options = backend_url(where, directory, f"h{nranks}-{counter['n']}-{int(collective)}")
                verdicts.append(write_and_check(comm, example, url, options, collective))
            bad = [v for v in verdicts if v]
            return " | ".join(bad) if bad else None
        return check

    examples_on_first_ranks(world, nranks, patterns(1 if nranks == "self" else nranks), make_check,
                            max_examples=12)


@pytest.mark.parametrize("nranks", [3, 4])
def test_plfs_on_hdfs_collective_write_and_read(world, mpi_tmp_path, backing, nranks):
    if world.size < nranks:
        pytest.skip(f"needs {nranks} ranks, the world has {world.size}")
    from mpi4py import MPI

    comm = split(world, nranks)
    if comm != MPI.COMM_NULL:
        try:
            make_directory(comm, "plfs-hdfs", str(mpi_tmp_path), backing)
            # LANL strided 47001-byte objects plus an uneven tail, holes between some objects.
            S, nobj = 47001, 3
            extents = [[] for _ in range(nranks)]
            for i in range(nobj):
                for r in range(nranks):
                    extents[r].append(((i * nranks + r) * (S + 10), S - 7 * r))
            example = {"extents": extents, "seed": 7,
                       "hints": {"cb_buffer_size": "64k", "cb_nodes": 2, "cb_write": "enable", "cb_read": "enable"}}
            for collective in (True, False):
                url, options = backend_url("plfs-hdfs", str(mpi_tmp_path), f"ckpt{nranks}-{int(collective)}", backing)
                verdict = write_and_check(comm, example, url, options, collective)
                assert verdict is None, verdict
        finally:
            comm.Free()
    world.Barrier()


def test_collective_reads_of_a_plain_hdfs_file(world, mpi_tmp_path, backing):
    """Reading needs no PLFS: HDFS has positional reads, so aggregators read it directly."""
    from mpi4py import MPI

    url, webhdfs = backing["hdfs"]
    path = f"{mpi_tmp_path}/plain.bin"
    payload = np.random.default_rng(3).integers(0, 256, 300_000, dtype=np.uint8)
    if world.rank == 0:
        fs = hpcbridge.connect(url, webhdfs=webhdfs)
        fs.mkdir(str(mpi_tmp_path), parents=True, exist_ok=True)
        fs.write_bytes(path, payload.tobytes())
    world.Barrier()
    P = world.size
    block = 5000
    view = MPI.BYTE.Create_vector(300_000 // (block * P), block, block * P)
    with File.open(world, f"{url}{path}", "r", hints={"cb_read": "enable", "cb_buffer_size": "64k"},
                   webhdfs=webhdfs) as f:
        f.set_view(world.rank * block, MPI.BYTE, view)
        out = np.zeros(300_000 // P, dtype=np.uint8)
        count = f.read_at_all(0, out)
        plan = f.last_plan
    view.Free()
    want = payload.reshape(-1, P, block)[:, world.rank, :].reshape(-1)
    assert count == out.size and np.array_equal(out, want)
    assert plan.method == "aggregated" and plan.rounds > 1


def test_lanl_strided_view_two_phase_on_posix(world, mpi_tmp_path):
    """The N-1 strided checkpoint through an MPI vector view, aggregated in several rounds,
    with the aggregator count and alignment the hints ask for."""
    from mpi4py import MPI

    P, S, nobj = world.size, 47001, 20
    data = np.full(S * nobj, world.rank + 1, dtype=np.uint8)
    url = f"file://{mpi_tmp_path}/lanl"
    view = MPI.BYTE.Create_vector(nobj, S, P * S)
    with File.open(world, url, "w", hints={"cb_nodes": 2, "cb_buffer_size": "256k", "striping_unit": "64k",
                                           "cb_write": "enable"}) as f:
        f.set_view(world.rank * S, MPI.BYTE, view)
        assert f.write_at_all(0, data) == data.nbytes
        plan = f.last_plan
        aggregators = f.aggregators
    view.Free()
    assert plan.method == "aggregated" and len(aggregators) == min(2, P)
    assert all(s % 65536 == 0 for s in plan.domain_starts[1:].tolist())
    assert plan.rounds >= 2
    if world.rank == 0:
        got = np.fromfile(f"{mpi_tmp_path}/lanl", dtype=np.uint8).reshape(nobj, P, S)
        assert all((got[:, r, :] == r + 1).all() for r in range(P))
    world.Barrier()


def test_subarray_view_and_file_pointer_calls(world, mpi_tmp_path):
    """A 2-D block decomposition written with write_all (file pointer) and a subarray filetype."""
    from mpi4py import MPI

    P = world.size
    rows, cols = 8, 6
    global_shape = (rows * P, cols)
    mine = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols) + 1000 * world.rank
    filetype = MPI.DOUBLE.Create_subarray(list(global_shape), [rows, cols], [rows * world.rank, 0])
    url = f"file://{mpi_tmp_path}/grid"
    with File.open(world, url, MPI.MODE_WRONLY | MPI.MODE_CREATE, hints={"cb_write": "enable"}) as f:
        f.set_view(0, MPI.DOUBLE, filetype)
        half = rows * cols // 2
        f.write_all(mine.reshape(-1)[:half])
        assert f.get_position() == half
        f.write_all(mine.reshape(-1)[half:])
    with File.open(world, url, "r") as f:
        f.set_view(0, MPI.DOUBLE, filetype)
        back = np.zeros_like(mine)
        f.read_all(back)
    filetype.Free()
    assert np.array_equal(back, mine)
    if world.rank == 0:
        whole = np.fromfile(f"{mpi_tmp_path}/grid", dtype=np.float64).reshape(global_shape)
        for r in range(P):
            assert whole[r * rows, 0] == 1000 * r
    world.Barrier()


def test_errors_reach_every_rank(world, mpi_tmp_path):
    with pytest.raises(FileNotFoundError):
        File.open(world, f"file://{mpi_tmp_path}/no/such/dir/file", "w")
    with pytest.raises(FileNotFoundError):
        File.open(world, f"file://{mpi_tmp_path}/absent", "r")
    with pytest.raises(ValueError, match="valid hints"):
        File.open(world, f"file://{mpi_tmp_path}/x", "w", hints={"cb_bufer_size": "4m"})
    path = f"{mpi_tmp_path}/exists"
    if world.rank == 0:
        open(path, "wb").close()
    world.Barrier()
    with pytest.raises(FileExistsError):
        File.open(world, f"file://{path}", "x")
    with File.open(world, f"file://{path}", "r") as f:
        with pytest.raises(Exception, match="read-only"):
            f.write_at(0, b"x")
    world.Barrier()


def test_reads_past_end_of_file_count_and_zero_fill(world, mpi_tmp_path):
    path = f"{mpi_tmp_path}/short"
    if world.rank == 0:
        with open(path, "wb") as out:
            out.write(bytes(range(256)) * 10)  # 2560 bytes
    world.Barrier()
    with File.open(world, f"file://{path}", "r", hints={"cb_read": "enable"}) as f:
        buf = bytearray(b"\xff" * 1000)
        count = f.read_at_all(world.rank * 1000, buf)
    start = world.rank * 1000
    expected = max(0, min(2560, start + 1000) - start)
    assert count == expected
    assert bytes(buf[:expected]) == (bytes(range(256)) * 10)[start:start + expected]
    assert bytes(buf[expected:]) == bytes(1000 - expected)
    world.Barrier()


def test_counts_over_int_range_use_64_bit_displacements(world, mpi_tmp_path):
    """A view whose file offsets pass 2 GiB (a sparse file): displacements stay 64-bit."""
    from mpi4py import MPI

    base = (3 << 30) + 5  # beyond 2**31
    url = f"file://{mpi_tmp_path}/far"
    data = np.full(10_000, world.rank + 1, dtype=np.uint8)
    with File.open(world, url, "w", hints={"cb_write": "enable", "cb_buffer_size": "4k"}) as f:
        f.set_view(base + world.rank * 10_000, MPI.BYTE, None)
        f.write_at_all(0, data)
    if world.rank == 0:
        with open(f"{mpi_tmp_path}/far", "rb") as check:
            check.seek(base)
            got = check.read(10_000 * world.size)
        assert got == b"".join(bytes([r + 1]) * 10_000 for r in range(world.size))
        assert os.path.getsize(f"{mpi_tmp_path}/far") == base + 10_000 * world.size
    world.Barrier()


def test_hints_must_agree_across_ranks(world, mpi_tmp_path):
    hints = {"cb_nodes": 1 + (world.rank % 2)}
    with pytest.raises(ValueError, match="same on every rank"):
        File.open(world, f"file://{mpi_tmp_path}/h", "w", hints=hints)
    world.Barrier()


def test_direct_write_unaligned_everything(world, mpi_tmp_path):
    """direct_write with unaligned offsets, lengths and buffers, independent and collective,
    large (write-behind) and small pieces; the file must hold exactly the bytes written."""
    from mpi4py import MPI

    rng = np.random.default_rng(11 + world.rank)
    url = f"file://{mpi_tmp_path}/direct"
    P = world.size
    pieces = [(r * 3_000_001 + 17, 2_500_003) for r in range(P)]  # > 1 MiB: written by their owner
    small = [(P * 3_000_001 + 100 + r * 50_001, 50_001) for r in range(P)]  # aggregated
    mine_big = rng.integers(0, 256, pieces[world.rank][1], dtype=np.uint8)
    mine_small = rng.integers(0, 256, small[world.rank][1], dtype=np.uint8)
    with File.open(world, url, "w", hints={"direct_write": "true", "cb_buffer_size": "1m"}) as f:
        f.set_view(pieces[world.rank][0] + 1, MPI.BYTE, None)
        f.write_at_all(0, mine_big[1:])          # odd file offset, buffer address and length
        f.set_view(0, MPI.BYTE, None)
        f.write_at(pieces[world.rank][0], mine_big[:1])      # independent, after write-behind
        f.write_at_all(small[world.rank][0], mine_small)     # small: aggregated, placed, direct
        direct = f._exchanger.direct
        f.sync()
    everything = world.allgather((pieces[world.rank][0], mine_big.tobytes(), small[world.rank][0],
                                  mine_small.tobytes()))
    if world.rank == 0:
        got = open(f"{mpi_tmp_path}/direct", "rb").read()
        for big_at, big, small_at, little in everything:
            assert got[big_at:big_at + len(big)] == big
            assert got[small_at:small_at + len(little)] == little
    assert direct  # /tmp is a local file system that takes O_DIRECT
    world.Barrier()


@st.composite
def write_behind_examples(draw, nranks):
    """A pattern of :func:`patterns` written in several collective calls with cb_write_behind."""
    example = draw(patterns(nranks))
    example["hints"]["cb_write_behind"] = "true"
    example["calls"] = draw(st.integers(1, 12))
    example["peek"] = draw(st.integers(-1, example["calls"] - 1))  # after this call, read own writes
    return example


def write_behind_and_check(comm, example, url, options, readable: bool) -> str | None:
    """Write each rank's stream in ``calls`` collective slices (staged, flushed together later);
    after call ``peek`` each rank reads back all it wrote so far, independently (its own stage
    goes out first), where the handle is ``readable`` (PLFS write handles are write-only); the
    closed file must equal the reference, and a collective read too."""
    from mpi4py import MPI

    rank, P = comm.rank, comm.size
    extents = example["extents"][rank]
    data = rank_data(example, rank)
    cuts = np.sort(np.random.default_rng(example["seed"] + 7919 * (rank + 1)).integers(
        0, data.size + 1, example["calls"] - 1))
    bounds = np.concatenate(([0], cuts, [data.size])).tolist()
    problems = []
    f = File.open(comm, url, "w+" if readable else "w", hints=example["hints"], **options)
    f.set_view(0, MPI.BYTE, extents if extents else None)
    try:
        for call in range(example["calls"]):
            lo, hi = bounds[call], bounds[call + 1]
            f.write_at_all(lo, data[lo:hi] if hi > lo else b"")
            if readable and call == example["peek"] and hi > 0:
                mine = np.zeros(hi, dtype=np.uint8)
                f.read_at(0, mine)
                if not np.array_equal(mine, data[:hi]):
                    problems.append(f"rank {rank}: read_at after call {call} misses its own staged writes")
    finally:
        f.close()
    if rank == 0 and read_whole(url, options) != reference_bytes(example, P):
        problems.append("file written behind differs from the reference")
    with File.open(comm, url, "r", **options) as f:
        f.set_view(0, MPI.BYTE, extents if extents else None)
        out = np.zeros_like(data)
        f.read_at_all(0, out if extents else bytearray(0))
        if not np.array_equal(out, data):
            problems.append(f"rank {rank}: read_at_all of the file written behind returned other bytes")
    everyone = comm.allgather(problems)
    flat = [p for ps in everyone for p in ps]
    return "; ".join(flat) if flat else None


@pytest.mark.parametrize("nranks", ["self", 1, 3, 4])
@pytest.mark.parametrize("where", LOCAL_BACKENDS)
def test_write_behind_across_calls_equals_reference(world, mpi_tmp_path, nranks, where):
    counter = {"n": 0}

    def make_check(comm):
        directory = directory_for(comm, mpi_tmp_path)

        def check(example):
            counter["n"] += 1
            url, options = backend_url(where, directory, f"wb{nranks}-{counter['n']}")
            return write_behind_and_check(comm, example, url, options, readable=where == "posix")
        return check

    examples_on_first_ranks(world, nranks, write_behind_examples(1 if nranks == "self" else nranks), make_check,
                            max_examples=15)
