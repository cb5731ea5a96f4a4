"""The command line's edges: --json anywhere, usage errors, relative paths, copies that cp would
refuse or treat specially (links, loops, into itself, trailing slashes), signals, broken pipes."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from .test_cli import run


@pytest.fixture
def tree(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.bin").write_bytes(os.urandom(1000))
    (src / "sub" / "b.txt").write_text("hello\n")
    return tmp_path


def test_json_anywhere_and_usage_errors_as_json(capsys, tree):
    for argv in (["--json", "ls", str(tree / "src")], ["ls", str(tree / "src"), "--json"]):
        code, out, _ = run(capsys, *argv)
        assert code == 0 and sorted(e["path"].rsplit("/", 1)[1] for e in json.loads(out)) == ["a.bin", "sub"]
    code, out, err = run(capsys, "--json", "ls")
    assert code == 2 and err == ""
    error = json.loads(out)
    assert error["type"] == "UsageError" and "url" in error["error"]
    code, out, err = run(capsys, "--json", "nosuchcommand")
    assert code == 2 and json.loads(out)["type"] == "UsageError"
    code, out, err = run(capsys, "ls")  # without --json: argparse's usage line and exit 2
    assert code == 2 and out == "" and err.startswith("usage: hpcbridge ls") and "error:" in err


def test_relative_paths_everywhere(capsys, tree, monkeypatch):
    monkeypatch.chdir(tree)
    code, out, _ = run(capsys, "ls", "src")
    assert code == 0 and out.split() == ["a.bin", "sub/"]
    code, out, _ = run(capsys, "stat", "src/a.bin")
    assert code == 0 and "size: 1000" in out
    code, out, _ = run(capsys, "layout", "src/a.bin", "--block-size", "256")
    assert code == 0 and "4 block(s)" in out


def test_bad_sizes_are_usage_errors(capsys, tree):
    code, _, err = run(capsys, "layout", str(tree / "src" / "a.bin"), "--block-size", "0")
    assert code == 2 and "must be at least 1 byte" in err


def test_no_clobber_names_the_option_and_missing_parents_the_destination(capsys, tree):
    code, _, _ = run(capsys, "put", str(tree / "src" / "a.bin"), str(tree / "copy.bin"))
    assert code == 0
    code, _, err = run(capsys, "put", "-n", str(tree / "src" / "a.bin"), str(tree / "copy.bin"))
    assert code == 1 and "-n/--no-clobber" in err and "overwrite=True" not in err and "copy.bin" in err
    code, _, err = run(capsys, "put", str(tree / "src" / "a.bin"), f"file://{tree}/nodir/x.bin")
    assert code == 1 and f"file://{tree}/nodir/x.bin" in err and "does not exist" in err
    assert "partial" not in err


def test_trailing_slash_means_a_directory(capsys, tree):
    code, _, err = run(capsys, "put", str(tree / "src" / "a.bin"), f"file://{tree}/nodir/")
    assert code == 1 and "No such directory" in err and not (tree / "nodir").exists()
    (tree / "there").mkdir()
    code, _, _ = run(capsys, "put", str(tree / "src" / "a.bin"), f"file://{tree}/there/")
    assert code == 0 and (tree / "there" / "a.bin").read_bytes() == (tree / "src" / "a.bin").read_bytes()
    code, _, _ = run(capsys, "get", f"file://{tree}/src/a.bin", str(tree / "there") + "/")
    assert code == 0
    code, _, err = run(capsys, "put", str(tree / "src" / "a.bin"), f"file://{tree}/there/a.bin/")  # a file
    assert code == 1 and "Not a directory" in err


def test_recursive_copy_needs_the_destinations_parent_as_cp_r(capsys, tree):
    for command, source in (("put", str(tree / "src")), ("get", f"file://{tree}/src")):
        code, _, err = run(capsys, command, "-r", source, f"{tree}/no/such/parent/src")
        assert code == 1 and "no/such/parent/src" in err and not (tree / "no").exists()
    code, _, _ = run(capsys, "put", "-r", str(tree / "src"), f"{tree}/copy")
    assert code == 0 and (tree / "copy" / "sub" / "b.txt").read_text() == "hello\n"


def test_recursive_copy_links_loops_and_into_itself(capsys, tree, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text("not for upload\n")
    src = tree / "src"
    os.symlink("..", src / "sub" / "loop")           # a loop
    os.symlink(str(outside), src / "elsewhere")      # a link out of the tree
    os.symlink("a.bin", src / "alias.bin")           # a link to a file
    os.symlink("missing", src / "dangling")

    code, out, err = run(capsys, "put", "-r", "--json", str(src), f"file://{tree}/skip")
    assert code == 0
    copied = sorted(r["destination"].split("/skip/")[1] for r in json.loads(out) if "destination" in r)
    assert copied == ["a.bin", "sub/b.txt"]
    assert sorted(r["source"].rsplit("/", 1)[1] for r in json.loads(out) if "skipped" in r) == \
        ["alias.bin", "dangling", "elsewhere", "loop"]

    code, _, _ = run(capsys, "put", "-r", "--links", "copy", str(src), f"file://{tree}/links")
    assert code == 0 and os.readlink(tree / "links" / "sub" / "loop") == ".."
    assert os.readlink(tree / "links" / "alias.bin") == "a.bin"

    code, _, err = run(capsys, "put", "-r", "--links", "follow", str(src), f"file://{tree}/follow")
    assert code == 0 and "symbolic link loop" in err and "dangling" in err
    assert (tree / "follow" / "elsewhere" / "secret.txt").read_text() == "not for upload\n"
    assert (tree / "follow" / "alias.bin").read_bytes() == (src / "a.bin").read_bytes()
    assert not (tree / "follow" / "sub" / "loop").exists()

    code, _, err = run(capsys, "put", "-r", str(src), f"file://{src}/inner")
    assert code == 1 and "into itself" in err and not (src / "inner").exists()
    code, _, err = run(capsys, "put", "-r", "--links", "copy", str(src), "memory://cli-edges/x")
    assert code == 1 and "needs a local destination" in err


def test_no_clobber_refuses_a_recursive_copy_before_copying_anything(capsys, tree):
    """put/get -r -n with one existing file stopped there, after copying part of the tree (which
    part depended on the small files copied at once); now refused up front, nothing copied."""
    src = tree / "src"
    for i in range(20):
        (src / f"f{i:02}").write_bytes(b"%d" % i)
    for command, source in (("put", str(src)), ("get", f"file://{src}")):
        dst = tree / f"dst-{command}"
        (dst / "src" / "sub").mkdir(parents=True)
        (dst / "src" / "sub" / "b.txt").write_text("keep me\n")
        code, out, err = run(capsys, command, "-r", "-n", "--json", source, str(dst))
        assert code == 1 and json.loads(out)["type"] == "FileExistsError" and "sub/b.txt" in json.loads(out)["error"]
        assert sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*")) == ["src", "src/sub", "src/sub/b.txt"]
        assert (dst / "src" / "sub" / "b.txt").read_text() == "keep me\n"
    code, _, err = run(capsys, "put", "-r", "-n", str(src), str(tree / "fresh"))  # nothing in the way
    assert code == 0 and (tree / "fresh" / "f19").read_bytes() == b"19"


def _modes(root):
    """``{relative path: permission bits}`` of a tree, the root included."""
    return {os.path.relpath(os.path.join(d, name), root): os.stat(os.path.join(d, name)).st_mode & 0o7777
            for d, dirs, files in os.walk(root) for name in [".", *dirs, *files]}


def test_recursive_copies_keep_directory_permissions_as_cp_r(capsys, tree):
    """cp -r gives the directories it makes their source's permission bits: a private (0700)
    directory stays private, a read-only one read-only (filled before it is made so). put/get -r
    made every directory 0755, exposing the names in a private one."""
    src = tree / "src"
    (src / "private").mkdir()
    (src / "private" / "key").write_text("secret\n")
    os.chmod(src / "private" / "key", 0o600)
    (src / "readonly").mkdir()
    (src / "readonly" / "f").write_text("r\n")
    os.chmod(src / "readonly", 0o555)
    os.chmod(src / "private", 0o700)
    os.chmod(src, 0o750)
    try:
        subprocess.run(["cp", "-r", str(src), str(tree / "oracle")], check=True)
        expected = _modes(tree / "oracle")
        assert expected["private"] == 0o700 and expected["readonly"] == 0o555
        code, _, err = run(capsys, "put", "-r", str(src), str(tree / "put"))
        assert code == 0, err
        assert _modes(tree / "put") == expected
        code, _, err = run(capsys, "get", "-r", f"file://{src}", str(tree / "get"))
        assert code == 0, err
        assert _modes(tree / "get") == expected
        # Into an existing directory: only the directory the copy makes takes the source's bits.
        (tree / "there").mkdir(mode=0o755)
        code, _, err = run(capsys, "put", "-r", str(src), str(tree / "there"))
        assert code == 0 and _modes(tree / "there" / "src") == expected
        assert os.stat(tree / "there").st_mode & 0o7777 == 0o755
    finally:
        for d in tree.rglob("readonly"):
            os.chmod(d, 0o755)


def test_dask_jobs_reject_bad_regexes(capsys, tree):
    data = tree / "lines.txt"
    data.write_text("alpha beta\ngamma\n")
    code, _, err = run(capsys, "dask", "grep", str(data), "(")
    assert code == 1 and "invalid grep regular expression '('" in err
    code, _, err = run(capsys, "dask", "wordcount", str(data), "--word", "[")
    assert code == 1 and "invalid word regular expression '['" in err


def test_wordcount_top_breaks_ties_in_byte_order(capsys, tree):
    """Hadoop WordCount's output is in the byte order of the words (Text keys); the top list
    broke ties by the order the partitions were merged in."""
    data = tree / "words.txt"
    data.write_text("b a c b a c d\n")
    code, out, _ = run(capsys, "dask", "wordcount", str(data), "--top", "2", "--json", "--no-locality")
    assert code == 0 and json.loads(out)["value"]["top"] == [["a", 2], ["b", 2]]


def test_teragen_prints_a_summary_not_json(capsys, tree):
    code, out, _ = run(capsys, "dask", "teragen", f"file://{tree}/tera", "--records", "1000", "--files", "2")
    assert code == 0
    assert out.startswith(f"teragen into file://{tree}/tera: 1000 records, 100000 bytes in 2 file(s)")
    assert "partitions" not in out and "{" not in out


def test_bench_report_json_writes_no_plot(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = {"benchmark": "lanl_checkpoint", "unit": 47001, "ranks": 4, "verification_failures": 0,
              "median_MBps": {"plfs-posix": {"write": 900.0, "read": 1000.0}}}
    (tmp_path / "r.json").write_text(json.dumps(result))
    code, out, _ = run(capsys, "bench", "report", "--json", str(tmp_path / "r.json"))
    assert code == 0 and json.loads(out)["plot"] is None and not (tmp_path / "results").exists()


def _cli(*argv, **kw):
    return subprocess.Popen([sys.executable, "-m", "hpcbridge", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kw)


def test_broken_pipe_is_quiet(tmp_path):
    # 3000 names of 48 bytes: 144 KB, more than a pipe holds (64 KiB), so `ls` is still writing
    # when the reader goes (3000 short names fit, and ls could finish first: a flaky test).
    pad = "x" * 41
    for i in range(3000):
        (tmp_path / f"f{i:05d}{pad}").touch()
    proc = _cli("ls", str(tmp_path), bufsize=0)
    first = proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read().decode()
    assert first == f"f00000{pad}\n".encode() and proc.wait(timeout=60) == 141 and err == ""


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signals_stop_a_copy_cleanly(tmp_path, signum, status):
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(1 << 30)  # sparse: reads cost no disk
    out = tmp_path / "out"
    out.mkdir()
    proc = _cli("put", "--no-progress", str(big), f"file://{out}/big.bin")
    deadline = time.monotonic() + 30
    while not any(out.iterdir()) and time.monotonic() < deadline:  # the partial file exists: copying
        time.sleep(0.01)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err
    assert ("interrupted" if signum == signal.SIGINT else "terminated") in err.decode()
    assert list(out.iterdir()) == []


def test_enospc_on_put_names_the_destination(capsys, tmp_path):
    # "[Errno 28] No space left on device" used to come without the URL the docs promise.
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root): no ENOSPC to provoke")
    try:
        big = tmp_path / "big.bin"
        big.write_bytes(os.urandom(3 << 20))
        code, _, err = run(capsys, "put", "--no-progress", str(big), f"file://{small}/big.bin")
        assert code == 1 and "No space left on device" in err and f"file://{small}/" in err
        assert list(small.iterdir()) == []  # the partial file went with the failure
    finally:
        subprocess.run(["umount", "-l", str(small)], check=True)


def test_names_coreutils_takes_as_they_are(capsys, tree, monkeypatch):
    """Found against coreutils: a name that is not UTF-8 broke ls, stat and put -r (its URL could
    not be quoted); a relative name with a colon was taken for a URL; ls "" listed the current
    directory; put/get dropped the permission bits; a destination under a file was reported
    under the hidden partial file's name."""
    monkeypatch.chdir(tree)
    odd = os.fsdecode(b"b\xffd")
    (tree / "src" / odd).write_bytes(b"x")
    env = dict(os.environ, PYTHONIOENCODING="utf-8:strict")  # a UTF-8 locale's strict stdout
    for argv, shown in ((["ls", "src"], b"\nb\xffd\n"), (["stat", f"src/{odd}"], b"/src/b%FFd\n")):
        done = subprocess.run([sys.executable, "-m", "hpcbridge", *argv], capture_output=True, env=env, timeout=120)
        assert done.returncode == 0 and shown in done.stdout, done
    code, _, _ = run(capsys, "put", "-r", "src", f"file://{tree}/copy")
    assert code == 0 and (tree / "copy" / odd).read_bytes() == b"x"
    (tree / "co:lon").write_bytes(b"c")
    code, out, _ = run(capsys, "ls", "co:lon")
    assert code == 0 and out.split() == ["co:lon"]
    code, _, err = run(capsys, "ls", "")
    assert code == 1 and "No such file" in err
    script = tree / "run.sh"
    script.write_bytes(b"#!/bin/sh\n")
    script.chmod(0o751)
    for command, source, target in (("put", "run.sh", f"file://{tree}/put.sh"), ("get", f"file://{tree}/run.sh", "got.sh")):
        code, _, _ = run(capsys, command, source, target)
        assert code == 0 and (tree / target.rsplit("/", 1)[-1]).stat().st_mode & 0o777 == 0o751
    code, _, err = run(capsys, "put", "run.sh", f"file://{tree}/run.sh/x")
    assert code == 1 and "Not a directory" in err and f"{tree}/run.sh/x" in err and "partial" not in err


def test_recursive_copy_of_a_directory_whose_url_is_percent_encoded(capsys, tree):
    """The copy plan took the local path from the percent-encoded URL (``a%20b``): ``put -r``
    of a directory with a space, ``%`` or ``#`` in its path failed with FileNotFoundError."""
    src = tree / "a b%#"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "x.txt").write_text("x\n")
    os.symlink("sub", src / "link")
    code, _, err = run(capsys, "put", "-r", str(src), f"file://{tree}/copy%20here")
    assert code == 0, err
    assert (tree / "copy here" / "sub" / "x.txt").read_text() == "x\n"
    assert not os.path.lexists(tree / "copy here" / "link")  # --links skip, as without the space


def test_links_copy_replaces_links_as_files_are_replaced(capsys, tree):
    """As cp -rP: a second ``put -r --links copy`` into the same place replaces the links (it
    failed with FileExistsError on the first one); -n refuses; a directory is never replaced."""
    src = tree / "src"
    os.symlink("sub", src / "dirlink")
    os.symlink("a.bin", src / "filelink")
    for _ in range(2):
        code, _, err = run(capsys, "put", "-r", "--links", "copy", str(src) + "/", f"file://{tree}/copy/")
        assert code == 0, err
    os.unlink(src / "filelink")
    os.symlink("sub/b.txt", src / "filelink")
    code, _, err = run(capsys, "put", "-r", "--links", "copy", str(src), f"file://{tree}/copy")
    assert code == 0, err
    assert os.readlink(tree / "copy" / "src" / "filelink") == "sub/b.txt"
    assert os.readlink(tree / "copy" / "src" / "dirlink") == "sub"
    code, _, err = run(capsys, "put", "-r", "-n", "--links", "copy", str(src), f"file://{tree}/copy")
    assert code == 1 and "no-clobber" in err
    (tree / "copy" / "src" / "dirlink").unlink()
    (tree / "copy" / "src" / "dirlink").mkdir()
    code, _, err = run(capsys, "put", "-r", "--links", "copy", str(src), f"file://{tree}/copy")
    assert code == 1 and "a directory" in err and (tree / "copy" / "src" / "dirlink").is_dir()
