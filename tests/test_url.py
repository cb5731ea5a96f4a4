"""URL parsing: what hpcbridge accepts and the errors for what it refuses."""

import os
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    ("hdfs://[::1]:51199/x", "hdfs", "[::1]:51199", "/x"),
    ("hdfs://root@nn.example.org:65535/x", "hdfs", "root@nn.example.org:65535", "/x"),
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
    ("hdfs://127.0.0.1:99999/x", r"port 99999 is out of range \(1-65535\)"),
    ("hdfs://nn:0/x", "port 0 is out of range"),
    ("hdfs://nn:-1/x", "invalid port '-1'"),
    ("hdfs://nn:９/x", "invalid port"),
    ("hdfs://bad host:51199/", "invalid host name 'bad host'"),
    ("hdfs://[::1/x", "without its closing"),
    ("hdfs://[zz::1]:1/x", "not an IPv6 address"),
    ("hdfs://[::1]x/", "unexpected 'x'"),
    ("hdfs://us er@nn:1/", "invalid user name"),
    ("plfs+", "composite scheme needs '://'"),
    ("plfs+hdfs://nn:1/a/ck,hdfs://nn:1/c", "volumes after the first are paths"),
])
def test_refused_forms_name_the_url(text, message):
    with pytest.raises(InvalidURLError, match=message) as excinfo:
        parse_url(text)
    assert isinstance(excinfo.value, ValueError)


def test_non_string_is_a_type_error():
    with pytest.raises(TypeError, match="expected a URL"):
        parse_url(42)


def test_ipv6_and_ports_reach_the_backend_parsed():
    import hpcbridge

    fs = hpcbridge.connect("hdfs://[::1]:51199/x")
    assert (fs.host, fs.port) == ("[::1]", 51199)
    assert hpcbridge.connect("hdfs://nn/x").port == 8020


def test_plfs_over_plfs_is_refused():
    import hpcbridge

    with pytest.raises(InvalidURLError, match="PLFS cannot be layered over PLFS"):
        hpcbridge.connect("plfs+plfs+file:///x")


@given(st.text(max_size=40))
@settings(max_examples=300, deadline=None)
def test_format_url_quotes_as_urllib_does(path):
    # format_url skips ``quote`` for paths with nothing to encode: the result must be urllib's.
    from urllib.parse import quote

    from hpcbridge.fs.url import format_url

    path = "/" + path
    assert format_url("plfs+file", "", path) == "plfs+file://" + quote(path, safe="/,:@+=~!$&*;")


def test_names_that_are_not_utf8_round_trip():
    """os.fsdecode gives such names surrogate escapes: their bytes are quoted as they are."""
    from hpcbridge.fs.url import format_url

    path = "/data/" + os.fsdecode(b"b\xffd \xe9t\xe9")
    url = format_url("file", "", path)
    assert url == "file:///data/b%FFd%20%E9t%E9" and parse_url(url).path == path
