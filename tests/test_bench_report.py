"""`hpcbridge bench report`: a table and a PNG from the JSON the kernels really write (1 rank)."""

import json
import os
import sys


from hpcbridge.cli.main import main

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))


def test_report_from_flash_io_and_bt_io(tmp_path, capsys):
    import bt_io
    import flash_io

    assert flash_io.main(["--nxb", "8", "--blocks", "2", "--dir", str(tmp_path), "--output",
                          str(tmp_path / "flash.json")]) == 0
    assert bt_io.main(["--class", "S", "--subtype", "epio", "--dir", str(tmp_path), "--output",
                       str(tmp_path / "bt.json")]) == 0
    capsys.readouterr()
    png = tmp_path / "report.png"
    assert main(["bench", "report", str(tmp_path / "flash.json"), str(tmp_path / "bt.json"),
                 "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "flash_io" in out and "class S, epio, mpi-io/posix" in out and "yes" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert main(["bench", "report", "--json", str(tmp_path / "bt.json"), "--plot", str(png)]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows[0]["benchmark"] == "bt_io" and float(rows[0]["MB/s"]) > 0


def test_report_rejects_files_that_are_not_results(tmp_path, capsys):
    (tmp_path / "x.json").write_text('{"hello": 1}')
    assert main(["bench", "report", str(tmp_path / "x.json")]) == 1
    assert "not written by an hpcbridge benchmark" in capsys.readouterr().err
    assert main(["bench", "report", str(tmp_path / "missing.json")]) == 1


def test_report_from_ior_and_shared_file_ceiling(tmp_path, capsys):
    """The MPI benchmarks' JSON (here from one rank) is reported too, with its verification."""
    import ior
    import shared_file_ceiling

    assert ior.main(["-a", "HPCBRIDGE", "-c", "-b", "64k", "-t", "16k", "-s", "2", "-e", "--verify", "-i", "2",
                     "-o", str(tmp_path / "ior" / "testFile"), "--json", str(tmp_path / "ior.json")]) == 0
    assert shared_file_ceiling.main(["-b", "64k", "-t", "16k", "--chunk", "32k", "-i", "1", "--verify",
                                     "--modes", "fpp,shared-strided", "-o", str(tmp_path / "ceiling"),
                                     "--json", str(tmp_path / "ceiling.json")]) == 0
    capsys.readouterr()
    assert main(["bench", "report", "--json", str(tmp_path / "ior.json"), str(tmp_path / "ceiling.json"),
                 "--plot", str(tmp_path / "report.png")]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    by_config = {row["configuration"]: row for row in rows}
    assert {"hpcbridge-coll/write -b 65536 -t 16384 -s 2 -e", "hpcbridge-coll/read -b 65536 -t 16384 -s 2 -e",
            "fpp", "shared-strided"} == set(by_config)
    assert all(float(row["MB/s"]) > 0 and row["verified"] == "yes" for row in rows)


def test_report_rows_of_locality_result():
    """locality.py's summary fields (the shape it writes) become one row per setting."""
    from hpcbridge.cli.report import rows_of

    result = {"benchmark": "locality", "dataset_bytes": 500_000_000, "datanodes": 3,
              "locality_on": {"seconds_median": 2.0, "local_fraction_median": 1.0, "all_exactly_once": True},
              "locality_off": {"seconds_median": 2.5, "local_fraction_median": 0.406, "all_exactly_once": False}}
    on, off = rows_of(result)
    assert (on["config"], on["MBps"], on["verified"]) == ("locality on, 100% local", 250.0, True)
    assert (off["config"], off["MBps"], off["verified"]) == ("locality off, 41% local", 200.0, False)


def test_report_rows_of_locality_on_emulated_hosts():
    """locality.py --netns writes one result per link rate: rows name the rate."""
    from hpcbridge.cli.report import rows_of

    one = {"dataset_bytes": 100_000_000, "datanodes": 3,
           "locality_on": {"seconds_median": 0.5, "local_fraction_median": 1.0, "all_exactly_once": True},
           "locality_off": {"seconds_median": 2.5, "local_fraction_median": 0.333, "all_exactly_once": True}}
    rows = rows_of({"benchmark": "locality", "netns": True, "by_link_rate": {"200mbit": one, "10gbit": one}})
    assert [r["config"] for r in rows] == ["links 200mbit, locality on, 100% local",
                                           "links 200mbit, locality off, 33% local",
                                           "links 10gbit, locality on, 100% local",
                                           "links 10gbit, locality off, 33% local"]
    assert [r["MBps"] for r in rows] == [200.0, 40.0, 200.0, 40.0]


def test_read_paths_runs_every_mode_and_checks_the_bytes(tmp_path, capsys):
    """read_paths.py at a small size, one repetition, with --bounds: every mode reads the bytes
    written (the benchmark compares them and exits otherwise) and the JSON has every ratio."""
    import read_paths

    out = tmp_path / "read_paths.json"
    assert read_paths.main(["--size", "3M", "--repetitions", "1", "--bounds", "--dir", str(tmp_path),
                            "--output", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["ratios"]) == {"whole_plfs_vs_posix", "objects_plfs_vs_posix", "read_blocks_vs_fromfile"}
    assert set(result["untargeted"]) == {"chunks_plfs_vs_posix", "whole_plfs_1t_vs_posix"}
    from hpcbridge.plfs.reader import PlfsReader

    assert PlfsReader.SHARED_READS  # whole-plfs-1t put it back
    assert set(result["bounds"]) == {"bound-1t_vs_whole_posix", "bound-2t_vs_whole_posix"}
    assert all(v > 0 for v in result["median_MBps"].values()) and "targets" in capsys.readouterr().out


def test_posix_overhead_small_run(tmp_path):
    import posix_overhead

    out = tmp_path / "overhead.json"
    assert posix_overhead.main(["--size", "4M", "--transfer", "1M", "--repetitions", "2", "--dir", str(tmp_path),
                                "--output", str(out)]) == 0
    assert json.loads(out.read_text())["benchmark"] == "posix_overhead"
