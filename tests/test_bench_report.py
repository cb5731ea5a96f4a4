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
