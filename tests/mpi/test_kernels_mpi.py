"""Small FLASH-IO and BT-IO runs under mpirun: they verify their own output; h5ls checks the
HDF5 files independently; file sizes are the kernels' own formulas."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.mpi(min_size=4)

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
sys.path.insert(0, os.path.abspath(BENCH))


@pytest.mark.parametrize("collective", [False, True])
def test_flash_io_small(world, mpi_tmp_path, collective):
    import flash_io

    out = str(mpi_tmp_path / "flash.json")
    args = ["--nxb", "8", "--blocks", "4", "--dir", str(mpi_tmp_path), "--keep", "--output", out]
    assert flash_io.main(args + (["--collective"] if collective else [])) == 0
    world.Barrier()
    if world.rank == 0:
        result = json.load(open(out))
        total = sum(4 + r % 3 for r in range(world.size))
        assert result["verified"] and result["blocks"] == total
        assert [round(f["raw_MiB"] * 2**20) for f in result["files"]] == [
            total * (8 ** 3 * 192 + 164), total * (8 ** 3 * 16 + 116), total * (9 ** 3 * 16 + 116)]
        listing = subprocess.run(["h5ls", str(mpi_tmp_path / "flash_io_test_hdf5_chk_0000")],
                                 capture_output=True, text=True, check=True).stdout
        for name in ("dens", "f13\\\\ ", "gid", "bounding\\\\ box", "simulation\\\\ parameters", "unknown\\\\ names"):
            assert name.replace("\\\\", "\\") in listing, name
        assert f"{{{total}, 8, 8, 8}}" in listing
        crn = subprocess.run(["h5ls", str(mpi_tmp_path / "flash_io_test_hdf5_plt_crn_0000")],
                             capture_output=True, text=True, check=True).stdout
        assert f"{{{total}, 9, 9, 9}}" in crn and "velx" not in crn
        dump = subprocess.run(["h5dump", "-d", "unknown names", str(mpi_tmp_path / "flash_io_test_hdf5_plt_cnt_0000")],
                              capture_output=True, text=True, check=True).stdout
        assert '"dens"' in dump and '"f1  "' in dump


@pytest.mark.parametrize("subtype", ["full", "simple", "epio"])
def test_bt_io_class_s(world, mpi_tmp_path, subtype):
    import bt_io

    out = str(mpi_tmp_path / f"bt-{subtype}.json")
    assert bt_io.main(["--class", "S", "--subtype", subtype, "--dir", str(mpi_tmp_path), "--output", out]) == 0
    world.Barrier()
    if world.rank == 0:
        result = json.load(open(out))
        assert result["verified"] and result["dumps"] == 12
        assert result["file_bytes"] == 12 ** 3 * 40 * 12  # 0.83 MB, the NPB class S size


def test_bt_io_epio_files_have_npbs_names(world, mpi_tmp_path):
    """btio.epio.out.NNNN, as NPB names them (they were btio.out.epio.out.NNNN)."""
    import bt_io

    directory = mpi_tmp_path / "epio-names"
    if world.rank == 0:
        directory.mkdir()
    world.Barrier()
    assert bt_io.main(["--class", "S", "--subtype", "epio", "--dir", str(directory), "--keep",
                       "--output", str(mpi_tmp_path / "bt-epio-names.json")]) == 0
    world.Barrier()
    assert sorted(os.listdir(directory)) == [f"btio.epio.out.{r:04d}" for r in range(world.size)]
    world.Barrier()


def test_bt_io_through_plfs(world, mpi_tmp_path):
    import bt_io

    out = str(mpi_tmp_path / "bt-plfs.json")
    url = f"plfs+file://{mpi_tmp_path}/btio.plfs"
    assert bt_io.main(["--class", "S", "--subtype", "simple", "--url", url, "--output", out]) == 0
    world.Barrier()
    if world.rank == 0:
        assert json.load(open(out))["verified"]
        assert not os.path.exists(f"{mpi_tmp_path}/btio.plfs")  # removed without --keep


def test_bt_io_epio_writes_one_record_per_cell(world, mpi_tmp_path):
    """NPB's epio writes one record per cell per dump (one Fortran write per cell), the records
    of a dump one after the other: p writes of a cell each, not one write of the whole dump."""
    import math

    import bt_io

    n, p = 12, math.isqrt(world.size)
    cells = bt_io.cells_of(world.rank, p, n)
    io = bt_io.StockIO(world, str(mpi_tmp_path / "btio.out"), "epio", n, cells, 12)
    calls = []

    class Recorder:
        def __init__(self, fh):
            self.fh = fh

        def Write_at(self, offset, buf):
            calls.append((offset, buf.nbytes))
            self.fh.Write_at(offset, buf)

    real, io.fh = io.fh, Recorder(io.fh)
    try:
        io.write(3, [bt_io.fill(c, n, 3) for c in cells])
    finally:
        io.fh = real
        io.close()
    record = [nz * ny * nx * 40 for (_, nz), (_, ny), (_, nx) in cells]  # 5 doubles per point
    assert calls == [(3 * sum(record) + sum(record[:c]), record[c]) for c in range(p)]


@pytest.mark.parametrize("subtype", ["full", "simple", "epio"])
@pytest.mark.parametrize("verify", [True, False])
def test_bt_io_times_the_close_as_io(world, mpi_tmp_path, monkeypatch, subtype, verify):
    """NPB times btio_cleanup (the file's close) as I/O, as the hpcbridge path already did; the
    stock path closed after the untimed verification. A slow close shows in the I/O time."""
    import time

    import bt_io

    real_close = bt_io.StockIO.close
    closes = []

    def slow_close(self):
        closes.append(1)
        if len(closes) == 1:  # the first close ends the timed dumps
            time.sleep(0.3)
        real_close(self)

    monkeypatch.setattr(bt_io.StockIO, "close", slow_close)
    result = bt_io.run(world, "S", subtype, path=str(mpi_tmp_path / "btio.out"), verify=verify)
    assert result["io_seconds"] >= 0.3
    assert result["verified"] is (True if verify else None)
    assert result["file_bytes"] == 12 ** 3 * 40 * 12


@pytest.mark.parametrize("subtype", ["full", "simple", "epio"])
def test_bt_io_verification_catches_a_flipped_byte(world, mpi_tmp_path, monkeypatch, subtype):
    """One byte changed in the file between the timed writes and the read-back fails one value."""
    import bt_io

    real_close = bt_io.StockIO.close
    closes = []

    def close_then_flip(self):
        real_close(self)
        closes.append(1)
        if len(closes) == 1:  # after the timed writes, before the verification reopens
            world.Barrier()
            if world.rank == 0:
                with open(self.path, "r+b") as f:
                    f.seek(12345)
                    old = f.read(1)
                    f.seek(12345)
                    f.write(bytes([old[0] ^ 0x10]))
            world.Barrier()

    monkeypatch.setattr(bt_io.StockIO, "close", close_then_flip)
    result = bt_io.run(world, "S", subtype, path=str(mpi_tmp_path / "btio.out"))
    assert result["verified"] is False and result["bad_values"] == 1


@pytest.mark.parametrize("scheme", ["file", "plfs+file"])
def test_bt_io_full_through_hpcbridge_mpi_matches_stock_mpiio(world, mpi_tmp_path, scheme):
    """BT-IO full: the same view through hpcbridge.mpi.File gives the same bytes as MPI-IO."""
    import bt_io

    out = str(mpi_tmp_path / f"bt-full-{scheme}.json")
    url = f"{scheme}://{mpi_tmp_path}/btio-{scheme}.out"
    assert bt_io.main(["--class", "S", "--subtype", "full", "--url", url, "--output", out, "--keep"]) == 0
    assert bt_io.main(["--class", "S", "--subtype", "full", "--dir", str(mpi_tmp_path), "--keep",
                       "--output", str(mpi_tmp_path / "bt-stock.json")]) == 0
    world.Barrier()
    if world.rank == 0:
        import hpcbridge

        assert json.load(open(out))["verified"]
        stock = open(f"{mpi_tmp_path}/btio.out", "rb").read()
        fs, path = hpcbridge.url_to_fs(url)
        with fs.open(path, "rb") as f:
            assert f.read() == stock and len(stock) == 12 ** 3 * 40 * 12
    world.Barrier()


@pytest.mark.parametrize("api,flags", [
    ("POSIX", []), ("POSIX", ["-F"]), ("MPIIO", ["-c"]), ("MPIIO", []), ("HDF5", ["-c"]),
    ("HPCBRIDGE", ["-c"]), ("HPCBRIDGE", ["-c", "-V", "--one-call"]), ("HPCBRIDGE", []),
])
def test_ior_small_runs_verify(world, mpi_tmp_path, api, flags):
    """Each IOR API writes, reads back the neighbour's data (-C) and checks every byte."""
    import ior

    out = str(mpi_tmp_path / f"ior-{api}-{'_'.join(flags)}.json")
    rc = ior.main(["-a", api, "-b", "96k", "-t", "32k", "-s", "3", "-C", "-e", "--verify", "-i", "2",
                   "-o", str(mpi_tmp_path / f"ior-{api}-{len(flags)}" / "testFile"), "--json", out] + flags)
    assert rc == 0
    world.Barrier()
    if world.rank == 0:
        result = json.load(open(out))
        (write_key,) = [k for k in result["results"] if k.endswith("/write")]
        runs = result["results"][write_key]
        assert len(runs) == 2 and all(r["bytes"] == 96 * 1024 * 3 * world.size for r in runs)
        assert all(r["bad_bytes"] == 0 for runs in result["results"].values() for r in runs)


@pytest.mark.parametrize("api", ["POSIX", "MPIIO"])
def test_ior_verify_finds_a_truncated_file(world, mpi_tmp_path, api):
    """A read of a file cut short left the previous transfer's bytes in the reused buffer: the
    check passed. Checked reads now start from a byte the pattern never holds."""
    import ior

    target = str(mpi_tmp_path / f"ior-cut-{api}" / "testFile")
    common = ["-a", api, "-b", "8k", "-t", "2k", "-s", "3", "-k", "-o", target]
    assert ior.main(common + ["-w", "--json", str(mpi_tmp_path / f"ior-cut-{api}-w.json")]) == 0
    world.Barrier()
    if world.rank == 0:
        os.truncate(target, 3 * 4 * 8192 - 10240)  # the last five transfers gone
    world.Barrier()
    out = str(mpi_tmp_path / f"ior-cut-{api}-r.json")
    assert ior.main(common + ["-r", "--verify", "--json", out]) == 1
    world.Barrier()
    if world.rank == 0:
        result = json.load(open(out))
        assert sum(r["bad_bytes"] for runs in result["results"].values() for r in runs) == 10240


def test_ior_file_per_process_url_reorder_reads_the_next_tasks_file(world, mpi_tmp_path):
    """-a HPCBRIDGE -F --url -C: the read opens the shifted task's testFile.%08d (it opened its
    own and --verify counted every byte bad)."""
    import ior

    url = f"file://{mpi_tmp_path}/url-fpp/testFile"
    if world.rank == 0:
        os.makedirs(f"{mpi_tmp_path}/url-fpp")
    world.Barrier()
    assert ior.main(["-a", "HPCBRIDGE", "-F", "-C", "--verify", "-b", "8k", "-t", "4k", "-s", "2",
                     "--url", url, "-o", str(mpi_tmp_path / "unused")]) == 0


def test_ior_compare_reports_ratios(world, mpi_tmp_path):
    import ior

    out = str(mpi_tmp_path / "ior-compare.json")
    assert ior.main(["--compare", "-b", "47001", "-t", "47001", "-s", "8", "-V", "--one-call", "--verify",
                     "-o", str(mpi_tmp_path / "cmp" / "testFile"), "--json", out]) == 0
    world.Barrier()
    if world.rank == 0:
        ratios = json.load(open(out))["ratios"]
        assert {"write: hpcbridge-coll / mpiio-coll", "write: hpcbridge-coll / posix-fpp"} <= set(ratios)
        assert all(v["of_max"] > 0 for v in ratios.values())


def test_ior_matrix_runs_every_row_and_mode_and_verifies(world, mpi_tmp_path):
    """--matrix, tiny: every row has every mode with a warm-up and a median, the two ratios to
    Open MPI's collective, and every byte written was read back right (plain pread / BT-IO's
    own read-back)."""
    import ior

    out = str(mpi_tmp_path / "ior-matrix.json")
    assert ior.main(["--matrix", "--objects", "6", "--mib", "2", "--small", "8", "--bt-class", "S", "-i", "2",
                     "-w", "-e", "--verify", "-o", str(mpi_tmp_path / "matrix" / "testFile"), "--json", out]) == 0
    world.Barrier()
    if world.rank == 0:
        matrix = json.load(open(out))["matrix"]
        assert list(matrix) == list(ior.ROW_NAMES)
        modes = {"hpcbridge-default", "hpcbridge-tuned", "mpiio-coll", "mpiio-indep", "posix-fpp"}
        for name, row in matrix.items():
            assert set(row["modes"]) == modes, name
            for mode, phases in row["modes"].items():
                write = phases["write"]
                assert len(write["MiBps"]) == 2 and write["median_MiBps"] == write["MiBps"][1] > 0, (name, mode)
                assert write["bad_bytes"] == 0, (name, mode)
            assert set(row["ratios"]) == {"write: hpcbridge-default / mpiio-coll",
                                          "write: hpcbridge-tuned / mpiio-coll"}
            assert row["tuned_hints"] == ior.TUNED_HINTS[name]
        assert matrix["lanl-per-object"]["segments"] == 6 and matrix["strided-4k"]["segments"] == 8
        bt = matrix["bt-io-full"]["modes"]
        assert [r["subtype"] for r in bt["mpiio-indep"]["write"]["runs"]] == ["simple", "simple"]
        assert all(r["bytes"] == 12 ** 3 * 40 * 12 for m in bt.values() for r in m["write"]["runs"])


def test_ior_matrix_check_catches_wrong_bytes(world, mpi_tmp_path):
    """The matrix's write check reads the file itself: a byte changed after the write is found."""
    import ior

    args = ior.parse_args(["-b", "8k", "-t", "4k", "-s", "2"])
    pattern = ior.Pattern(world, args.block, args.transfer, args.segments)
    mode = ior.Mode("POSIX", fpp=True)
    base = str(mpi_tmp_path / "check" / "f")
    if world.rank == 0:
        os.makedirs(os.path.dirname(base), exist_ok=True)
    world.Barrier()
    assert ior.run_phase(world, args, mode, pattern, base, writing=True)["bad_bytes"] == 0
    assert ior.check_written(world, pattern, mode, base) == 0
    path = ior.file_name(base, world.rank, True)
    with open(path, "r+b") as f:
        f.seek(5000)
        old = f.read(1)
        f.seek(5000)
        f.write(bytes([old[0] ^ 0xFF]))
    assert ior.check_written(world, pattern, mode, base) == 1
    os.truncate(path, 10000)
    assert ior.check_written(world, pattern, mode, base) == 1 + 16384 - 10000
    world.Barrier()


def test_ior_matrix_rejects_bad_options(capsys):
    import ior

    for argv in (["--matrix", "--compare"], ["--matrix", "--rows", "nope"], ["--matrix", "--objects", "0"],
                 ["--matrix", "--hint", "cb_nodes=1"], ["--matrix", "--tuned-hint", "direct_write"]):
        with pytest.raises(SystemExit):
            ior.parse_args(argv)
    assert "--tuned-hint takes NAME=VALUE" in capsys.readouterr().err


def test_shared_file_ceiling_small_run_verifies(world, mpi_tmp_path):
    """Every mode of the ceiling benchmark writes the bytes it claims to, at the right offsets."""
    import shared_file_ceiling

    out = str(mpi_tmp_path / "ceiling.json")
    assert shared_file_ceiling.main(["-b", "256k", "-t", "64k", "--chunk", "128k", "-i", "2", "-e", "--verify",
                                     "-o", str(mpi_tmp_path / "ceiling"), "--json", out]) == 0
    world.Barrier()
    if world.rank == 0:
        result = json.load(open(out))
        assert set(result["MiBps"]) == set(shared_file_ceiling.MODES)
        assert all(len(v) == 2 and min(v) > 0 for v in result["MiBps"].values())
        assert result["bad_bytes"] == {mode: 0 for mode in shared_file_ceiling.MODES}
        assert result["shared_ceiling"]["mode"].startswith("shared")


def test_shared_file_ceiling_rejects_bad_input(world, capsys):
    import shared_file_ceiling

    for argv, message in ((["--modes", "fpp,nope"], "unknown mode"), (["-b", "1m", "-t", "3000"], "multiple of -t"),
                          (["--chunk", "5000"], "multiples of 4096"), (["-i", "0"], "at least 1")):
        with pytest.raises(SystemExit):
            shared_file_ceiling._parse(argv)
        assert message in capsys.readouterr().err


def test_lanl_checkpoint_small_run_verifies_every_byte(world, mpi_tmp_path, monkeypatch):
    """The LANL N-1 kernel runs in make test; a byte changed between write and read, past each
    object's 16-byte stamp, fails one object in every mode (only the stamp was checked)."""
    from pathlib import Path

    import lanl_checkpoint as lanl

    def run(name, *extra):
        out = str(mpi_tmp_path / f"{name}.json")
        rc = lanl.main(["--per-rank", "470010", "--unit", "47001", "--repetitions", "1", "--cache", "keep",
                        "--dir", str(mpi_tmp_path), "--output", out, *extra])
        world.Barrier()
        with open(out) as f:
            return rc, json.load(f)

    rc, result = run("lanl-clean", "--checksums", "both")
    assert rc == 0 and result["verification_failures"] == 0
    assert set(result["median_MBps"]) == {"mpiio-indep", "mpiio-coll", "n-n", "plfs-posix", "plfs-posix-nocrc"}

    real_drop = lanl.drop_caches

    def flip_a_byte_then_drop(comm, enabled):
        comm.Barrier()
        if comm.rank == 0:  # the file (or data log) the mode just wrote: object 0 of its writer
            files = [p for p in Path(mpi_tmp_path).glob("hpcbridge-lanl-*/**/*")
                     if p.is_file() and (p.name.startswith(("nn.", "data.")) or p.suffix == ".shared")]
            newest = max(files, key=lambda p: p.stat().st_mtime_ns)
            with open(newest, "r+b") as f:
                f.seek(5000)
                old = f.read(1)
                f.seek(5000)
                f.write(bytes([old[0] ^ 0x55]))
        comm.Barrier()
        real_drop(comm, enabled)

    monkeypatch.setattr(lanl, "drop_caches", flip_a_byte_then_drop)
    rc, result = run("lanl-flipped", "--checksums", "off")
    assert rc == 1 and result["verification_failures"] == 4  # one object in each of the four modes
    rc, result = run("lanl-flipped-crc", "--checksums", "on")  # PLFS's CRC refuses it: counted, not hung
    assert rc == 1 and result["verification_failures"] >= 4


def test_read_phase_shifts_by_a_node(world, mpi_tmp_path, monkeypatch):
    """IOR -C reads what the next node wrote (rankOffset = tasks per node), and so does the LANL
    test: with two tasks per node, rank r reads rank r+2's data, not its node-mate's (r+1).
    Simulated on one machine by saying that rank 0's node holds two tasks."""
    import _common
    import ior
    import lanl_checkpoint as lanl

    monkeypatch.setattr(_common, "tasks_on_first_node", lambda comm: 2)
    P = world.size
    opened = []

    class Recording(ior.PosixIO):
        def __init__(self, comm, path, writing, *rest):
            if not writing:
                opened.append(os.path.basename(path))
            super().__init__(comm, path, writing, *rest)

    monkeypatch.setitem(ior.IO_CLASSES, "POSIX", Recording)
    base = str(mpi_tmp_path / "shift" / "testFile")
    assert ior.main(["-a", "POSIX", "-F", "-C", "--verify", "-b", "8k", "-t", "4k", "-o", base]) == 0
    assert opened == [f"testFile.{(world.rank + 2) % P:08d}"]

    owners = []
    real_read_nn = lanl.read_nn

    def read_nn(comm, directory, owner, *rest, **kw):
        owners.append(owner)
        return real_read_nn(comm, directory, owner, *rest, **kw)

    monkeypatch.setattr(lanl, "read_nn", read_nn)
    rc = lanl.main(["--per-rank", "94002", "--unit", "47001", "--repetitions", "1", "--cache", "keep",
                    "--dir", str(mpi_tmp_path), "--output", str(mpi_tmp_path / "lanl-shift.json")])
    assert rc == 0 and set(owners) == {(world.rank + 2) % P}


def test_read_shift_on_one_node_is_one_task(world):
    """All ranks on one machine: IOR's offset would be 0 (each rank reads its own data); the
    kernels read the next task's instead (docs/kernels.md)."""
    import _common

    assert _common.tasks_on_first_node(world) == world.size
    assert _common.read_shift(world) == 1


@pytest.mark.parametrize("api,flags", [("POSIX", []), ("POSIX", ["-F"]), ("MPIIO", [])])
def test_ior_write_phase_starts_from_no_file(world, mpi_tmp_path, api, flags):
    """IOR removes the test file before every write phase (unless -E), with -k too: a kept,
    longer file is replaced, not overwritten in place (it kept its old length and blocks)."""
    import ior

    base = str(mpi_tmp_path / f"fresh-{api}{''.join(flags)}" / "testFile")
    fpp = "-F" in flags
    if world.rank == 0:
        os.makedirs(os.path.dirname(base))
        for r in range(world.size) if fpp else [0]:
            with open(ior.file_name(base, r, fpp), "wb") as f:
                f.write(b"\xff" * (1 << 20))  # an old, longer file
    world.Barrier()
    assert ior.main(["-a", api, *flags, "-b", "8k", "-t", "4k", "-s", "2", "-w", "-k", "--verify", "-o", base]) == 0
    expected = 2 * 8192 * (1 if fpp else world.size)
    assert os.path.getsize(ior.file_name(base, world.rank if fpp else 0, fpp)) == expected


def test_lanl_checkpoint_reports_the_lanl_figures(world, mpi_tmp_path):
    """The LANL test reports effective (open .. close) and I/O-only bandwidth, min/avg/max over
    ranks, in MiB/s: every mode and phase has them, ordered, I/O-only above effective."""
    import lanl_checkpoint as lanl

    out = str(mpi_tmp_path / "lanl-figures.json")
    assert lanl.main(["--per-rank", "94002", "--unit", "47001", "--repetitions", "2", "--cache", "keep",
                      "--dir", str(mpi_tmp_path), "--output", out]) == 0
    world.Barrier()
    with open(out) as f:
        result = json.load(f)
    for mode, phases in result["lanl_MiBps"].items():
        for phase, runs in phases.items():
            assert len(runs) == 2, (mode, phase)
            for run in runs:
                for key in ("effective", "io_only"):
                    spread = run[f"{key}_MiBps"]
                    assert 0 < spread["min"] <= spread["avg"] <= spread["max"], (mode, phase, key)
                    # all bytes over first start .. last end: that window holds every rank's own
                    assert run[f"aggregate_{key}_MiBps"] <= world.size * spread["min"] * 1.0001
                assert run["io_only_MiBps"]["max"] >= run["effective_MiBps"]["max"]


def test_lanl_n_n_makes_one_call_per_object(world, mpi_tmp_path, monkeypatch):
    """The LANL test's N-N writes and reads each object with one call; through a buffered file
    47001-byte objects were joined into 94002-byte writes (and read in 128 KiB pieces)."""
    import lanl_checkpoint as lanl
    from hpcbridge.fs.posix import PosixRawFile

    calls = []
    real_write, real_readinto = PosixRawFile.write, PosixRawFile.readinto

    def write(self, data):
        if "/nn." in self.name:
            calls.append(("write", memoryview(data).nbytes))
        return real_write(self, data)

    def readinto(self, buffer):
        if "/nn." in self.name:
            calls.append(("read", memoryview(buffer).nbytes))
        return real_readinto(self, buffer)

    monkeypatch.setattr(PosixRawFile, "write", write)
    monkeypatch.setattr(PosixRawFile, "readinto", readinto)
    assert lanl.main(["--per-rank", "141003", "--unit", "47001", "--repetitions", "1", "--cache", "keep",
                      "--dir", str(mpi_tmp_path), "--output", str(mpi_tmp_path / "lanl-nn.json")]) == 0
    # 3 objects written; read twice (the timed read, then the untimed check of every byte)
    assert calls == [("write", 47001)] * 3 + [("read", 47001)] * 6
