"""`hpcbridge plfs info|check|flatten|export` and the persisted flattened index."""

import json


import hpcbridge
import hpcbridge.plfs
from hpcbridge.cli.main import main
from hpcbridge.plfs.reader import load_index


def make(tmp_path, writers=3, leave_open=False):
    url = f"plfs+file://{tmp_path}/ck"
    for r in range(writers):
        f = hpcbridge.plfs.open(url, "wb", shared=True)
        f.pwrite(bytes([r + 1]) * 1000, r * 2000)
        f.close()
    if leave_open:
        f = hpcbridge.plfs.open(url, "wb", shared=True)
        f.pwrite(b"z" * 10, 9000)
        f.flush()
        return url, f
    return url, None


def test_info_and_check_of_a_healthy_container(tmp_path, capsys):
    url, _ = make(tmp_path)
    assert main(["plfs", "info", "--json", url]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["writers"], info["index_records"], info["logical_size"], info["physical_bytes"]) == (3, 3, 5000, 3000)
    assert info["open_writers"] == [] and info["metadata_records"] == 3
    assert main(["plfs", "check", url]) == 0
    out = capsys.readouterr().out
    assert "2 hole(s) of 2000 bytes" in out and "healthy" in out


def test_check_reports_unclosed_writers_and_short_logs(tmp_path, capsys):
    url, handle = make(tmp_path, leave_open=True)
    assert main(["plfs", "check", "--json", url]) == 1
    report = json.loads(capsys.readouterr().out)
    assert any("never closed" in p for p in report["problems"]) and report["logical_size"] == 9010
    handle.close()
    fs = hpcbridge.connect("plfs+file:///")
    container = fs.container(f"{tmp_path}/ck")
    logs = [container.data_log(writer)[1] for writer, _, _ in container.index_logs()]
    data = max(logs, key=lambda p: open(p, "rb").seek(0, 2))  # a 1000-byte log (not the 10-byte one)
    with open(data, "r+b") as f:
        f.truncate(10)
    assert main(["plfs", "check", url]) == 1
    assert "data log has 10 bytes, its index needs" in capsys.readouterr().out


def test_flatten_is_used_until_a_log_changes(tmp_path, capsys):
    url, _ = make(tmp_path)
    fs = hpcbridge.connect("plfs+file:///")
    container = fs.container(f"{tmp_path}/ck")
    assert main(["plfs", "flatten", url]) == 0
    capsys.readouterr()
    calls = []
    original = container.read_index_logs
    container.read_index_logs = lambda *args: calls.append(1) or original(*args)
    index, _ = load_index(container)
    assert not calls and index.size == 5000  # served from flat.index
    f = hpcbridge.plfs.open(url, "wb", shared=True)
    f.pwrite(b"new", 0)
    f.close()
    index, _ = load_index(container)
    assert calls and index.size == 5000  # a new log: the flattened index is stale and ignored
    assert fs.read_bytes(f"{tmp_path}/ck")[:3] == b"new"


def test_export_and_ls_show_the_logical_file(tmp_path, capsys):
    url, _ = make(tmp_path)
    assert main(["plfs", "export", "--progress", url, str(tmp_path / "plain.bin")]) == 0
    data = (tmp_path / "plain.bin").read_bytes()
    assert data == b"\x01" * 1000 + bytes(1000) + b"\x02" * 1000 + bytes(1000) + b"\x03" * 1000
    capsys.readouterr()
    assert main(["ls", "--json", f"plfs+file://{tmp_path}"]) == 0
    entries = {e["path"].rsplit("/", 1)[1]: e for e in json.loads(capsys.readouterr().out)}
    assert entries["ck"]["type"] == "file" and entries["ck"]["size"] == 5000
    assert entries["plain.bin"]["type"] == "other" and entries["plain.bin"]["size"] == 5000


def test_errors(tmp_path, capsys):
    assert main(["plfs", "info", f"file://{tmp_path}"]) == 1
    assert "not a PLFS URL" in capsys.readouterr().err
    assert main(["plfs", "info", f"plfs+file://{tmp_path}/nothing"]) == 1
    assert "no PLFS container" in capsys.readouterr().err
    url, _ = make(tmp_path)
    assert main(["plfs", "export", url]) == 2  # a usage error, as argparse's own
    assert "needs a destination" in capsys.readouterr().err
