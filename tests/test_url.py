"""URL parsing: what hpcbridge accepts and the errors for what it refuses."""

import pathlib

import pytest

from hpcbridge.errors import InvalidURLError
from hpcbridge.fs.url import parse_url


@pytest.mark.parametrize("text, scheme, netloc, path", [
    ("/data/x", "file", "", "/data/x"),
    ("file:///data/x", "file", "", "/data/x"),
    ("file://localhost/data/x", "file", "", "/data/x"),
    ("file:/data/x", "file", "", "/data/x"),
    ("//data//./y/../x/", "file", "", "/data/x"),
    ("file:///data/with%20space", "file", "", "/data/with space"),
    ("hdfs://nn:9820/user/a", "hdfs", "nn:9820", "/user/a"),
    ("HDFS://nn:9820", "hdfs", "nn:9820", "/"),
    ("plfs+file:///ckpt", "plfs+file", "", "/ckpt"),
    ("plfs+hdfs://nn:9820/ckpt", "plfs+hdfs", "nn:9820", "/ckpt"),
    ("plfs+file:///a,/b,/c", "plfs+file", "", "/a,/b,/c"),
    ("memory://store/k", "memory", "store", "/k"),
])
def test_accepted_forms(text, scheme, netloc, path):
    url = parse_url(text)
    assert (url.scheme, url.netloc, url.path) == (scheme, netloc, path)


def test_pathlike_and_roundtrip():
    url = parse_url(pathlib.Path("/tmp/a b"))
    assert str(url) == "file:///tmp/a%20b"
    assert parse_url(str(url)).path == "/tmp/a b"
    assert parse_url("plfs+hdfs://nn:1/x").inner_url == "hdfs://nn:1/x"
    assert parse_url("plfs+hdfs://nn:1/x").base_scheme == "plfs"


@pytest.mark.parametrize("text, message", [
    ("relative/path", "relative path"),
    ("./x", "relative path"),
    ("", "empty URL"),
    ("file://otherhost/x", "this machine only"),
    ("/bad\0path", "NUL"),
    ("plfs+://x/y", "lacks its inner scheme"),
])
def test_refused_forms_name_the_url(text, message):
    with pytest.raises(InvalidURLError, match=message) as excinfo:
        parse_url(text)
    assert isinstance(excinfo.value, ValueError)


def test_non_string_is_a_type_error():
    with pytest.raises(TypeError, match="expected a URL"):
        parse_url(42)
