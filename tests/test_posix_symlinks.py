"""Symbolic links on the POSIX backend, against the oracles: ``os.walk(followlinks=False)``,
fsspec's local file system and ``os.unlink``/``rm`` (docs/file-api.md, "Symbolic links").

``find``/``walk`` followed links to directories: a link cycle gave 40 repeated levels (then
ELOOP) and a link to a sibling directory listed its files twice, so a Dask job over the tree
read them twice. ``rm`` of a dangling link raised FileNotFoundError, and ``rm(dirlink,
recursive=True)`` raised EIO and removed nothing.
"""

from __future__ import annotations

import os

import pytest
from fsspec.implementations.local import LocalFileSystem

from hpcbridge.dask.partitions import expand_paths
from hpcbridge.fs.fsspec_adapter import fsspec_class
from hpcbridge.fs.posix import PosixFileSystem


@pytest.fixture
def tree(tmp_path):
    """a/f1, a/sub/f2, and links: b -> a, loop -> ., flink -> a/f1, dang -> missing."""
    (tmp_path / "a" / "sub").mkdir(parents=True)
    (tmp_path / "a" / "f1").write_bytes(b"one")
    (tmp_path / "a" / "sub" / "f2").write_bytes(b"two!")
    os.symlink("a", tmp_path / "b")
    os.symlink(".", tmp_path / "loop")
    os.symlink("a/f1", tmp_path / "flink")
    os.symlink("missing", tmp_path / "dang")
    return tmp_path


def _os_walk(root):
    return [(d, sorted(dirs), sorted(files)) for d, dirs, files in os.walk(root, followlinks=False)]


def test_walk_and_find_do_not_follow_directory_links(tree):
    fs = PosixFileSystem()
    assert sorted(fs.walk(str(tree))) == sorted(_os_walk(str(tree)))
    expected = sorted(os.path.join(d, f) for d, _, files in os.walk(tree) for f in files)
    assert fs.find(str(tree)) == expected
    # fsspec's local file system descends no link either; it lists links to directories as
    # files, where os.walk (and we) list them as directories, not as data to read.
    local = [p for p in LocalFileSystem().find(str(tree)) if not os.path.isdir(p)]
    assert fs.find(str(tree)) == local
    # The root itself may be a link: it is walked, as os.walk walks it.
    assert fs.find(str(tree / "b")) == [str(tree / "b" / "f1"), str(tree / "b" / "sub" / "f2")]


def test_links_that_cannot_be_followed_are_listed_not_fatal(tree):
    """A link to itself (ELOOP on stat) made ls, walk and find of its directory fail."""
    os.symlink("self", tree / "self")
    os.symlink("self", tree / "a" / "to_self")
    fs = PosixFileSystem()
    assert fs.ls(str(tree)) == sorted(str(tree / n) for n in os.listdir(tree))
    assert [e.type for e in fs.ls(str(tree), detail=True) if e.path.endswith("/self")] == ["other"]
    assert sorted(fs.walk(str(tree))) == sorted(_os_walk(str(tree)))
    fs.rm(str(tree / "self"))
    assert not os.path.lexists(tree / "self")


def test_fsspec_adapter_find_and_du_do_not_follow_directory_links(tree):
    os.unlink(tree / "dang")  # fsspec's du stats every file: a dangling link fails there too
    ours, local = fsspec_class("file")(), LocalFileSystem()
    assert ours.find(str(tree)) == [p for p in local.find(str(tree)) if not os.path.isdir(p)]
    # fsspec's local du adds the st_size of the links to directories (4096 each on ext4) as
    # if they were files; the bytes of the files find lists are the answer.
    assert ours.du(str(tree)) == sum(local.size(p) for p in ours.find(str(tree))) == 3 + 4 + 3
    with_dirs = set(local.find(str(tree), withdirs=True)) | {str(tree)}
    assert ours.find(str(tree), withdirs=True) == sorted(with_dirs)


def test_dask_expand_paths_reads_each_file_once(tree):
    os.unlink(tree / "dang")
    _, files = expand_paths(f"file://{tree}")
    assert files == sorted(os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs)
    _, files = expand_paths(f"file://{tree}/**")
    assert len(files) == len(set(os.path.realpath(f) for f in files)) + 1  # flink is a second name of f1


@pytest.mark.parametrize("recursive", [False, True])
@pytest.mark.parametrize("name", ["dang", "flink", "b", "loop"])
def test_rm_of_a_link_removes_the_link_only(tree, name, recursive):
    fs = PosixFileSystem()
    fs.rm(str(tree / name), recursive=recursive)
    assert not os.path.lexists(tree / name)  # as os.unlink
    assert (tree / "a" / "f1").read_bytes() == b"one" and (tree / "a" / "sub" / "f2").read_bytes() == b"two!"


@pytest.mark.parametrize("name", ["dang", "flink", "b"])
def test_fsspec_adapter_rm_of_a_link_removes_the_link_only(tree, name):
    ours = fsspec_class("file")()
    ours.rm_file(str(tree / name))  # as fsspec's local rm_file: os.remove
    assert not os.path.lexists(tree / name)
    os.symlink("a", tree / name)
    ours.rm(str(tree / name))
    assert not os.path.lexists(tree / name)
    os.symlink("a", tree / name)
    ours.rm(str(tree / name), recursive=True)
    assert not os.path.lexists(tree / name)
    assert sorted(os.listdir(tree / "a")) == ["f1", "sub"] and (tree / "a" / "sub" / "f2").exists()


@pytest.mark.parametrize("pattern, removed", [("b", ["b"]), ("[bl]*", ["b", "loop"])])
def test_fsspec_adapter_rm_with_maxdepth_removes_a_link_not_its_target(tree, pattern, removed):
    """rm(dirlink, recursive=True, maxdepth=...) expanded the link and removed the files of the
    directory it points to (fsspec's local rm does too); os.unlink removes the link only."""
    fsspec_class("file")().rm(str(tree / pattern), recursive=True, maxdepth=3)
    assert sorted(os.listdir(tree)) == sorted({"a", "b", "loop", "flink", "dang"} - set(removed))
    assert (tree / "a" / "f1").read_bytes() == b"one" and (tree / "a" / "sub" / "f2").read_bytes() == b"two!"


def test_rm_recursive_keeps_what_links_inside_the_tree_point_to(tree, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "keep").write_bytes(b"keep")
    os.symlink(str(outside), tree / "a" / "out")
    PosixFileSystem().rm(str(tree / "a"), recursive=True)  # as shutil.rmtree: links are unlinked
    assert not (tree / "a").exists() and (outside / "keep").read_bytes() == b"keep"
