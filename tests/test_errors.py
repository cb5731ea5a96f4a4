"""Bad input through the top-level API gets a clear exception naming the URL (issue 'Done when')."""

import errno
import io

import pytest

import hpcbridge
from hpcbridge.errors import InvalidURLError, MissingDependencyError, UnknownSchemeError
from hpcbridge.fs import registry


def test_unknown_scheme(tmp_path):
    with pytest.raises(UnknownSchemeError, match=r"'gopher'.*known schemes: .*file") as excinfo:
        hpcbridge.open("gopher://host/x")
    assert isinstance(excinfo.value, ValueError)
    with pytest.raises(UnknownSchemeError):
        hpcbridge.connect("s4://bucket/x")


def test_relative_path_where_absolute_required():
    with pytest.raises(InvalidURLError, match="'data/x.bin' is a relative path.*os.path.abspath"):
        hpcbridge.open("data/x.bin")
    with pytest.raises(InvalidURLError, match="relative"):
        hpcbridge.connect("/").open("data/x.bin")


def test_missing_file(tmp_path):
    url = f"file://{tmp_path}/missing.bin"
    with pytest.raises(FileNotFoundError, match="posix backend") as excinfo:
        hpcbridge.open(url)
    assert excinfo.value.filename == url
    assert url in str(excinfo.value)


def test_directory_opened_as_file(tmp_path):
    with pytest.raises(IsADirectoryError, match=f"file://{tmp_path}"):
        hpcbridge.open(str(tmp_path))
    with pytest.raises(IsADirectoryError, match=f"file://{tmp_path}"):
        hpcbridge.open(str(tmp_path), "wb")


def test_negative_offset_or_length(tmp_path):
    fs = hpcbridge.connect("/")
    path = f"{tmp_path}/f.bin"
    fs.write_bytes(path, b"0123456789")
    with pytest.raises(ValueError, match=f"negative offset -4 for file://{path}"):
        fs.pread(path, offset=-4, length=2)
    with pytest.raises(ValueError, match=f"negative length -2 for file://{path}"):
        fs.pread(path, offset=0, length=-2)
    with pytest.raises(ValueError, match="negative start"):
        fs.block_locations(path, start=-1)
    with hpcbridge.open(path) as f:
        with pytest.raises(ValueError, match=f"negative offset -1 for file://{path}"):
            f.pread(3, -1)
    with pytest.raises(TypeError, match="must be an int"):
        fs.pread(path, offset=1.5, length=2)


def test_file_system_pread_takes_keywords_not_a_swappable_order(tmp_path):
    """The handle's pread(size, offset) and the file system's pread took their numbers in
    opposite orders: a swap read other bytes without an error. Now the file system's are
    keywords, and the old positional form says so."""
    fs = hpcbridge.connect("/")
    path = f"{tmp_path}/f.bin"
    fs.write_bytes(path, b"0123456789")
    assert fs.pread(path, offset=2, length=3) == b"234"
    with hpcbridge.open(path) as f:
        assert f.pread(3, 2) == b"234"
    with pytest.raises(TypeError, match=r"offset= and length= as keywords.*pread\(size, offset\) takes the size"):
        fs.pread(path, 2, 3)


def test_write_on_read_only_handle(tmp_path):
    path = f"{tmp_path}/ro.bin"
    hpcbridge.connect("/").write_bytes(path, b"x")
    with hpcbridge.open(path, "rb") as f:
        with pytest.raises(io.UnsupportedOperation, match=f"file://{path} is open read-only"):
            f.write(b"y")
        with pytest.raises(io.UnsupportedOperation, match="read-only"):
            f.pwrite(b"y", 0)


def test_permission_denied_names_url(tmp_path):
    """Root ignores permission bits, so as root the open runs with the effective uid of nobody."""
    import os

    path = tmp_path / "locked"
    path.write_bytes(b"x")
    path.chmod(0)
    as_root = os.geteuid() == 0
    if as_root:
        os.seteuid(65534)  # reversible: the real uid stays 0
    try:
        with pytest.raises(PermissionError) as excinfo:
            hpcbridge.open(str(path))
    finally:
        if as_root:
            os.seteuid(0)
    assert f"file://{path}" in str(excinfo.value) and "posix backend" in str(excinfo.value)


def test_missing_optional_dependency_gets_an_install_hint(monkeypatch):
    monkeypatch.setitem(registry._IN_TREE, "needsdep", ("hpcbridge_no_such_module:X", "pip install thing"))
    registry._loaded.pop("needsdep", None)
    with pytest.raises(MissingDependencyError, match="needsdep:// .*pip install thing") as excinfo:
        hpcbridge.connect("needsdep://h/x")
    assert isinstance(excinfo.value, ImportError)


def test_invalid_backend_options():
    with pytest.raises(ValueError, match="block_size must be a positive int"):
        hpcbridge.connect("/", block_size=0)
    with pytest.raises(TypeError):
        hpcbridge.connect("/", no_such_option=1)


def test_hdfs_not_replicated_yet_says_why_and_what_to_do():
    # hdfs-native raises the NameNode's exception as text; the Java client would have retried.
    from hpcbridge.fs.hdfs import HdfsFileSystem
    fs = HdfsFileSystem("127.0.0.1:1", driver="native")  # lazy: connects on first call, never here
    exc = fs._translate_rpc(RuntimeError(
        'RPCError("org.apache.hadoop.hdfs.server.namenode.NotReplicatedYetException", '
        '"Not replicated yet: /d/f.bin\\n\\tat org.apache...")'), "/d/f.bin", "write")
    assert isinstance(exc, OSError) and exc.errno == errno.EIO
    text = str(exc)
    assert "hdfs://127.0.0.1:1/d/f.bin" in text and "NotReplicatedYetException" in text
    assert "num-committed-allowed" in text and "libhdfs" in text
