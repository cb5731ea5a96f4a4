"""The hpcbridge command: every subcommand, --json output, errors and exit codes."""

import json
import os
import subprocess
import sys

import pytest

from hpcbridge.cli.main import main, parse_size


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.bin").write_bytes(os.urandom(10_000))
    (tmp_path / "src" / "sub").mkdir()
    (tmp_path / "src" / "sub" / "b.txt").write_text("hello\n")
    return tmp_path


def test_ls_plain_long_and_json(capsys, tree):
    code, out, _ = run(capsys, "ls", f"file://{tree}/src")
    assert code == 0 and out.split() == ["a.bin", "sub/"]
    code, out, _ = run(capsys, "ls", "-l", str(tree / "src"))
    assert "10000" in out and out.splitlines()[0].startswith("-rw")
    code, out, _ = run(capsys, "ls", "--json", str(tree / "src"))
    entries = json.loads(out)
    assert [(e["path"].rsplit("/", 1)[1], e["type"]) for e in entries] == [("a.bin", "file"), ("sub", "directory")]


def test_stat_and_json(capsys, tree):
    code, out, _ = run(capsys, "stat", str(tree / "src" / "a.bin"))
    assert code == 0 and "size: 10000" in out and "backend: posix" in out
    code, out, _ = run(capsys, "stat", "--json", str(tree / "src" / "a.bin"))
    info = json.loads(out)
    assert info["size"] == 10000 and info["capabilities"]["positional_write"] is True


def test_layout_table_and_json(capsys, tree):
    code, out, _ = run(capsys, "layout", "--block-size", "4K", str(tree / "src" / "a.bin"))
    assert code == 0 and "3 block(s)" in out and out.splitlines()[0].split()[:3] == ["block", "offset", "length"]
    code, out, _ = run(capsys, "layout", "--json", "--block-size", "4K", "--start", "5000", str(tree / "src" / "a.bin"))
    blocks = json.loads(out)["blocks"]
    assert [(b["offset"], b["length"]) for b in blocks] == [(5000, 3192), (8192, 1808)]


def test_put_and_get_files_and_trees(capsys, tree):
    code, out, _ = run(capsys, "put", str(tree / "src" / "a.bin"), f"file://{tree}/copy.bin")
    assert code == 0 and "copied 1 file(s)" in out
    assert (tree / "copy.bin").read_bytes() == (tree / "src" / "a.bin").read_bytes()
    code, out, err = run(capsys, "get", str(tree / "src"), str(tree / "dst"))
    assert code == 1 and "use -r" in err
    code, out, _ = run(capsys, "get", "--json", "-r", str(tree / "src"), str(tree / "dst"))
    records = json.loads(out)
    assert code == 0 and len(records) == 2
    assert (tree / "dst" / "sub" / "b.txt").read_text() == "hello\n"
    # into an existing directory: the copy lands inside it
    code, _, _ = run(capsys, "put", str(tree / "src" / "a.bin"), str(tree / "dst"))
    assert code == 0 and (tree / "dst" / "a.bin").exists()
    code, _, err = run(capsys, "put", "-n", str(tree / "src" / "a.bin"), str(tree / "copy.bin"))
    assert code == 1 and "FileExistsError" in err


def test_progress_bar_on_large_copies(capsys, tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(9 << 20))
    code, _, err = run(capsys, "put", "--progress", str(big), str(tmp_path / "big2.bin"))
    assert code == 0 and "copy:" in err and "100%" in err
    code, _, err = run(capsys, "put", "--no-progress", str(big), str(tmp_path / "big3.bin"))
    assert code == 0 and "100%" not in err


def test_errors_exit_1_and_name_the_url(capsys, tmp_path):
    code, _, err = run(capsys, "stat", f"file://{tmp_path}/nope")
    assert code == 1 and f"file://{tmp_path}/nope" in err and "FileNotFoundError" in err
    code, out, _ = run(capsys, "stat", "--json", "hdfs://nn:http/x")
    assert code == 1 and json.loads(out)["type"] == "InvalidURLError"
    code, _, err = run(capsys, "ls", "gopher://x/y")
    assert code == 1 and "UnknownSchemeError" in err


def test_bad_usage_exits_2(capsys):
    assert main(["layout", "/x", "--block-size", "lots"]) == 2
    assert "invalid size 'lots'" in capsys.readouterr().err


def test_parse_size():
    assert [parse_size(s) for s in ("4096", "64M", "64MiB", "1G", "2k")] == [4096, 64 << 20, 64 << 20, 1 << 30, 2048]


def test_python_dash_m_and_console_script(tmp_path):
    out = subprocess.run([sys.executable, "-m", "hpcbridge", "--help"], capture_output=True, text=True, check=True).stdout
    assert all(cmd in out for cmd in ("ls", "stat", "layout", "put", "get"))
    script = os.path.join(os.path.dirname(sys.executable), "hpcbridge")
    out = subprocess.run([script, "ls", "--json", str(tmp_path)], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []
