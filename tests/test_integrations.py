"""fsspec users (pandas, dask.bag, fsspec.open) and pyarrow (dataset, Parquet) through hpcbridge."""

import pickle

import fsspec
import pytest

import hpcbridge


def test_fsspec_open_and_protocol_registration(tmp_path):
    url = f"hpcbridge+file://{tmp_path}/x.txt"
    with fsspec.open(url, "wt") as f:
        f.write("line\n")
    fs, path = fsspec.core.url_to_fs(url)
    assert type(fs).__name__ == "FileFSSpec" and path == f"{tmp_path}/x.txt"
    assert fs.cat_file(path, 1, 3) == b"in" and fs.cat_file(path, -2) == b"e\n"
    assert fs.info(path)["size"] == 5 and fs.unstrip_protocol(path) == url
    assert pickle.loads(pickle.dumps(fs)).cat(path) == b"line\n"
    with pytest.raises(FileNotFoundError, match="posix backend"):
        fs.cat(f"{tmp_path}/missing")


def test_pandas_csv_and_parquet(tmp_path):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"rank": [0, 1, 2], "mbps": [1.5, 2.5, 3.5]})
    frame.to_csv(f"hpcbridge+file://{tmp_path}/out/f.csv", index=False)  # parent made on write
    assert pd.read_csv(f"hpcbridge+file://{tmp_path}/out/f.csv").equals(frame)
    frame.to_parquet(f"hpcbridge+file://{tmp_path}/f.parquet")
    assert pd.read_parquet(f"hpcbridge+file://{tmp_path}/f.parquet").equals(frame)


def test_dask_bag_read_text(tmp_path):
    db = pytest.importorskip("dask.bag")
    for i in range(3):
        (tmp_path / f"part-{i}.txt").write_text("".join(f"{i} {j}\n" for j in range(10_000)))
    bag = db.read_text(f"hpcbridge+file://{tmp_path}/part-*.txt", blocksize=20_000)
    assert bag.npartitions > 3  # blocks, not whole files
    assert bag.count().compute(scheduler="sync") == 30_000  # every line once across block edges
    assert sorted(bag.map(str.split).pluck(0).frequencies().compute(scheduler="processes")) == [
        ("0", 10_000), ("1", 10_000), ("2", 10_000)]


def test_pyarrow_dataset_and_parquet_through_any_backend(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from hpcbridge.arrow import filesystem, filesystem_and_path

    table = pa.table({"x": list(range(1000)), "y": [str(i) for i in range(1000)]})
    for url in (f"file://{tmp_path}", "memory://arrow-test/data"):
        afs, root = filesystem_and_path(url)
        if url.startswith("memory"):
            hpcbridge.connect(url).mkdir(root, parents=True, exist_ok=True)
        pq.write_table(table, f"{root}/t.parquet", filesystem=afs)
        assert pq.read_table(f"{root}/t.parquet", filesystem=afs).equals(table)
        dataset = ds.dataset(root, filesystem=afs, format="parquet")
        assert dataset.to_table().num_rows == 1000
    assert isinstance(filesystem(f"file://{tmp_path}"), pa.fs.PyFileSystem)


def test_fsspec_mv_rm_and_mkdir_semantics(tmp_path):
    fs = fsspec.filesystem("hpcbridge+file", skip_instance_cache=True)
    fs.pipe(f"{tmp_path}/a/b/c.bin", b"abc")
    fs.mv(f"{tmp_path}/a/b/c.bin", f"{tmp_path}/moved.bin")
    assert fs.cat(f"{tmp_path}/moved.bin") == b"abc"
    fs.mkdir(f"{tmp_path}/new/dir")
    fs.mv(f"{tmp_path}/moved.bin", f"{tmp_path}/new/dir")
    assert fs.exists(f"{tmp_path}/new/dir/moved.bin")
    fs.rm(f"{tmp_path}/new", recursive=True)
    assert not fs.exists(f"{tmp_path}/new")
    with pytest.raises(FileExistsError):
        fs.makedirs(f"{tmp_path}/a")
    with pytest.raises(FileExistsError):
        fs.pipe_file(f"{tmp_path}/a/b/c.bin", b"", mode="create") or fs.pipe_file(
            f"{tmp_path}/a/b/c.bin", b"", mode="create")
    with pytest.raises(OSError, match="transactions"):
        with fs.transaction:
            fs.pipe(f"{tmp_path}/t.bin", b"x")


def test_fsspec_calls_as_fsspecs_local_file_system(tmp_path):
    """rm with maxdepth (it deleted files, then refused a directory), read_block (files had no
    .size), mv of a directory into one without recursive=True, a file opened under a file."""
    ours = fsspec.filesystem("hpcbridge+file", skip_instance_cache=True)
    local = fsspec.filesystem("file")
    for fs, root in ((local, tmp_path / "local"), (ours, tmp_path / "ours")):
        for name in ("t/f", "t/sub/g", "src/h", "csv"):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(b"1,2\n3,4\n5,6\n")
        (root / "dst").mkdir()
        fs.rm(str(root / "t"), recursive=True, maxdepth=5)
        assert not (root / "t").exists()
        assert fs.read_block(str(root / "csv"), 1, 4, delimiter=b"\n") == b"3,4\n"
        fs.mv(str(root / "src"), str(root / "dst"))
        assert (root / "dst" / "src" / "h").exists() and not (root / "src").exists()
        with pytest.raises(NotADirectoryError):
            fs.open(str(root / "csv" / "x"), "wb")


def test_arrow_directory_calls_on_a_file_as_pyarrows_local(tmp_path):
    """FSSpecHandler deleted a file asked to be deleted as a directory; pyarrow's local refuses."""
    import pyarrow.fs as pafs

    import hpcbridge.arrow

    (tmp_path / "a.txt").write_bytes(b"x")
    fs, path = hpcbridge.arrow.filesystem_and_path(f"file://{tmp_path}")
    for ours, theirs in ((fs, path), (pafs.LocalFileSystem(), str(tmp_path))):
        for call in (ours.delete_dir, ours.delete_dir_contents):
            with pytest.raises(OSError):
                call(f"{theirs}/a.txt")
        with pytest.raises(FileExistsError):
            ours.create_dir(f"{theirs}/a.txt", recursive=True)
    assert (tmp_path / "a.txt").read_bytes() == b"x"


def _tree(root):
    """``{relative path: bytes or None for a directory}`` of everything under ``root``."""
    import os

    out = {}
    for directory, dirs, files in os.walk(root):
        for d in dirs:
            out[os.path.relpath(os.path.join(directory, d), root)] = None
        for f in files:
            with open(os.path.join(directory, f), "rb") as handle:
                out[os.path.relpath(os.path.join(directory, f), root)] = handle.read()
    return out


def _outcome(call):
    try:
        call()
        return "ok"
    except OSError:  # shutil.Error is one; ours name the errno
        return "OSError"
    except ValueError:
        return "ValueError"


MOVES = [("d", "d/"), ("d", "./d"), ("d", "e/../d"), ("d", "d/sub"), ("d", "e2"), ("d/", "e"),
         ("d/x.txt", "p/q/x.txt"), ("d/x.txt", "e"), ("d", "new")]


@pytest.mark.parametrize("src, dst", MOVES)
def test_fsspec_mv_as_fsspecs_local_file_system(tmp_path, src, dst):
    """Oracle: fsspec's local file system (shutil.move). A directory moved onto itself written
    another way or into its own subdirectory was deleted; into a directory holding one of its
    name, merged over it."""
    ours = fsspec.filesystem("hpcbridge+file", skip_instance_cache=True)
    local = fsspec.filesystem("file", auto_mkdir=True, skip_instance_cache=True)
    results = []
    for fs, root in ((local, tmp_path / "local"), (ours, tmp_path / "ours")):
        (root / "d" / "sub").mkdir(parents=True)
        (root / "d" / "x.txt").write_bytes(b"data")
        (root / "e" / "e2" / "d").mkdir(parents=True)
        (root / "e2" / "d").mkdir(parents=True)
        (root / "e2" / "d" / "x.txt").write_bytes(b"old")
        outcome = _outcome(lambda: fs.mv(f"{root}/{src}", f"{root}/{dst}", recursive=True))
        results.append((outcome, _tree(root)))
    assert results[1] == results[0]


def test_fsspec_rm_as_fsspecs_local_file_system(tmp_path):
    """rm_file removed an empty directory; rm of a directory without recursive is a ValueError."""
    ours = fsspec.filesystem("hpcbridge+file", skip_instance_cache=True)
    local = fsspec.filesystem("file", skip_instance_cache=True)
    results = []
    for fs, root in ((local, tmp_path / "local"), (ours, tmp_path / "ours")):
        (root / "e").mkdir(parents=True)
        (root / "f" / "g").mkdir(parents=True)
        outcomes = [_outcome(lambda: fs.rm_file(f"{root}/e")), _outcome(lambda: fs.rm_file(f"{root}/f")),
                    _outcome(lambda: fs.rm(f"{root}/e"))]
        results.append((outcomes, _tree(root)))
    assert results[1] == results[0]


ARROW_CALLS = {
    "move file into dir": lambda fs, r: fs.move(f"{r}/a.txt", f"{r}/e"),
    "move dir onto empty dir": lambda fs, r: fs.move(f"{r}/d", f"{r}/f"),
    "move dir onto non-empty dir": lambda fs, r: fs.move(f"{r}/e", f"{r}/d"),
    "move dir onto itself": lambda fs, r: fs.move(f"{r}/g", f"{r}/g/"),
    "copy file onto dir": lambda fs, r: fs.copy_file(f"{r}/a.txt", f"{r}/e"),
    "copy dir": lambda fs, r: fs.copy_file(f"{r}/d", f"{r}/dd"),
    "info under a file": lambda fs, r: fs.get_file_info([f"{r}/a.txt/x"])[0].type.name,
    "open a directory": lambda fs, r: fs.open_input_file(f"{r}/d"),
    "stream a directory": lambda fs, r: fs.open_input_stream(f"{r}/d"),
    "open under a file": lambda fs, r: fs.open_input_file(f"{r}/a.txt/x"),
}


@pytest.mark.parametrize("name", sorted(ARROW_CALLS))
def test_arrow_calls_as_pyarrows_local(tmp_path, name):
    """Oracle: pyarrow's LocalFileSystem. FSSpecHandler's move went through fsspec's mv (into
    directories, and a directory moved onto itself was deleted); copy_file copied into a
    directory; a path under a file failed get_file_info; a directory opened was "not found"."""
    import pyarrow.fs as pafs

    import hpcbridge.arrow

    results = []
    for kind in ("local", "ours"):
        root = tmp_path / kind
        for d in ("d/sub", "e", "f", "g"):
            (root / d).mkdir(parents=True)
        (root / "a.txt").write_bytes(b"a")
        (root / "d" / "x.txt").write_bytes(b"x")
        (root / "g" / "y").write_bytes(b"y")
        fs, path = (pafs.LocalFileSystem(), str(root)) if kind == "local" else \
            hpcbridge.arrow.filesystem_and_path(f"file://{root}")
        try:
            value = ARROW_CALLS[name](fs, path)
            outcome = value if isinstance(value, str) else "ok"
        except IsADirectoryError:
            outcome = "IsADirectoryError"
        except NotADirectoryError:
            outcome = "NotADirectoryError"
        except FileNotFoundError:
            outcome = "FileNotFoundError"
        except OSError:
            outcome = "OSError"
        results.append((outcome, _tree(root)))
    local, ours = results
    if local[0] == "OSError" and ours[0] in ("IsADirectoryError", "NotADirectoryError"):
        ours = ("OSError", ours[1])  # Arrow's own errors are plain OSError; ours say which
    assert ours == local


ARROW_DELETES = {
    "delete_dir of a glob": lambda fs, r: fs.delete_dir(f"{r}/d*"),
    "delete_dir of a name with brackets": lambda fs, r: fs.delete_dir(f"{r}/q[1]"),
    "delete_file of a glob": lambda fs, r: fs.delete_file(f"{r}/a?"),
    "delete_file of a name with brackets": lambda fs, r: fs.delete_file(f"{r}/x[1].txt"),
    "delete_file of a directory": lambda fs, r: fs.delete_file(f"{r}/q[1]"),
    "delete_dir_contents with brackets inside": lambda fs, r: fs.delete_dir_contents(f"{r}/e"),
}


@pytest.mark.parametrize("name", sorted(ARROW_DELETES))
def test_arrow_deletes_take_paths_literally_as_pyarrows_local(tmp_path, name):
    """Oracle: pyarrow's LocalFileSystem. FSSpecHandler deleted through fsspec's rm, which expands
    globs: delete_dir("d*") removed d1 and d2, delete_file("a?") a1, a2 and "a?", and
    delete_dir_contents left "[x]" behind (the glob "[x]" removed "x" instead)."""
    import pyarrow.fs as pafs

    import hpcbridge.arrow

    results = []
    for kind in ("local", "ours"):
        root = tmp_path / kind
        for name_ in ("a1", "a2", "a?", "x[1].txt", "d1/x", "d2/x", "e/[x]", "e/x", "q[1]/y"):
            (root / name_).parent.mkdir(parents=True, exist_ok=True)
            (root / name_).write_bytes(name_.encode())
        fs, path = (pafs.LocalFileSystem(), str(root)) if kind == "local" else \
            hpcbridge.arrow.filesystem_and_path(f"file://{root}")
        try:
            ARROW_DELETES[name](fs, path)
            outcome = "ok"
        except OSError as exc:
            outcome = type(exc).__name__
        results.append((outcome, _tree(root)))
    assert results[1] == results[0]


def test_arrow_file_system_pickles_as_pyarrows_local(tmp_path):
    """Oracle: pyarrow's LocalFileSystem pickles; ours failed ("Can't pickle local object
    _handler.<locals>._TrackingHandler"). Loaded in a fresh interpreter, it reads the file."""
    import subprocess
    import sys

    import pyarrow.fs as pafs

    import hpcbridge.arrow

    (tmp_path / "a.txt").write_bytes(b"abc")
    fs, path = hpcbridge.arrow.filesystem_and_path(f"file://{tmp_path}")
    for theirs in (pafs.LocalFileSystem(), fs):
        assert pickle.loads(pickle.dumps(theirs)).get_file_info(f"{path}/a.txt").size == 3
    code = ("import pickle, sys; fs = pickle.loads(sys.stdin.buffer.read()); "
            f"f = fs.open_input_file({path + '/a.txt'!r}); print(f.read().decode())")
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(fs), capture_output=True, check=True)
    assert out.stdout.strip() == b"abc"


def test_fsspec_relative_paths_never_reach_another_file(tmp_path, monkeypatch):
    """Oracle: fsspec's local file system reads a relative path (and file://data/x) from the
    working directory. hpcbridge refuses relative paths (docs/file-api.md); the fsspec adapter
    read them from the root instead ("x" as "/x", file://data/x as "/x"): another file."""
    from hpcbridge.errors import InvalidURLError

    ours = fsspec.filesystem("hpcbridge+file", skip_instance_cache=True)
    local = fsspec.filesystem("file", skip_instance_cache=True)
    target = tmp_path / "target.txt"  # what the root-relative reading reached
    target.write_bytes(b"other file")
    cwd = tmp_path / "cwd"
    for rel in (str(target).lstrip("/"), "data" + str(target)):
        (cwd / rel).parent.mkdir(parents=True, exist_ok=True)
        (cwd / rel).write_bytes(b"the relative path")
    monkeypatch.chdir(cwd)
    for path in (str(target).lstrip("/"), f"file://data{target}", f"hpcbridge+file://data{target}"):
        if not path.startswith("hpcbridge+"):
            assert local.cat_file(path) == b"the relative path"
        with pytest.raises(InvalidURLError):
            ours.cat_file(path)
    assert ours.ls("") == ours.ls("/")  # "" is fsspec's root, as before


@pytest.mark.timeout(10)  # put_file of a file onto itself never ended
@pytest.mark.parametrize("call", ["get_file", "put_file", "get", "put"])
@pytest.mark.parametrize("spelling", ["{}/a.txt", "{}/d/../a.txt", "{}/link.txt"])
def test_fsspec_transfer_of_a_file_onto_itself_as_fsspecs_local(tmp_path, call, spelling):
    """Oracle: fsspec's local file system raises shutil.SameFileError and keeps the file;
    fsspec's generic get_file truncated it (the target is opened first) and put_file looped."""
    import shutil

    ours = fsspec.filesystem("hpcbridge+file", skip_instance_cache=True)
    local = fsspec.filesystem("file", skip_instance_cache=True)
    for fs, root in ((local, tmp_path / "local"), (ours, tmp_path / "ours")):
        (root / "d").mkdir(parents=True)
        (root / "a.txt").write_bytes(b"data")
        (root / "link.txt").symlink_to(root / "a.txt")
        with pytest.raises(shutil.SameFileError):
            getattr(fs, call)(f"{root}/a.txt", spelling.format(root))
        assert (root / "a.txt").read_bytes() == b"data"
