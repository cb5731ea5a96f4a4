"""PLFS containers on the real HDFS cluster against the conformance suite, on the default HDFS
driver (hdfs-native). The PLFS layer's checks do not depend on the driver, and each driver passes
the suite on plain HDFS (tests/conformance/test_hdfs.py); a second run here cost ~110 s of make test.

The backdoor shares no code with hpcbridge: WebHDFS REST copies a container's files to a local
directory (or a local container to HDFS) and the standard-library reference implementation of
docs/plfs-format.md (tests/plfs/reference.py) reads (or writes) it there.
"""

import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request

import pytest

import hpcbridge
from hpcbridge.testing import Backdoor, FileSystemConformance

from ..plfs import reference
from ..webhdfs_backdoor import WebHdfsBackdoor

pytestmark = pytest.mark.hdfs


class WebHdfsReferenceBackdoor(Backdoor):
    """A PLFS container in HDFS, moved over WebHDFS and decoded or encoded by the reference."""

    def __init__(self, http_port):
        self.web = WebHdfsBackdoor(http_port)

    def _status(self, path, op):
        try:
            with urllib.request.urlopen(self.web._url(path, op), timeout=30) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise FileNotFoundError(path) from None
            raise

    def _download(self, path, local):
        os.makedirs(local, exist_ok=True)
        for entry in self._status(path, "LISTSTATUS")["FileStatuses"]["FileStatus"]:
            child = f"{path}/{entry['pathSuffix']}"
            if entry["type"] == "DIRECTORY":
                self._download(child, os.path.join(local, entry["pathSuffix"]))
            else:
                with open(os.path.join(local, entry["pathSuffix"]), "wb") as f:
                    f.write(self.web.read(child))

    def _delete(self, path):
        request = urllib.request.Request(self.web._url(path, "DELETE", recursive="true"), method="DELETE")
        with urllib.request.urlopen(request, timeout=30) as response:
            json.load(response)

    def write(self, path, data):
        self._delete(path)
        with tempfile.TemporaryDirectory(prefix="hpcbridge-plfs-door-") as local:
            container = os.path.join(local, "c")
            reference.write_logical(container, data)
            for dirpath, _, files in os.walk(container):
                for name in files:
                    rel = os.path.relpath(os.path.join(dirpath, name), container)
                    with open(os.path.join(dirpath, name), "rb") as f:
                        self.web.write(f"{path}/{rel}", f.read())

    def read(self, path):
        local = tempfile.mkdtemp(prefix="hpcbridge-plfs-door-")
        try:
            self._download(path, os.path.join(local, "c"))
            return reference.read_logical(os.path.join(local, "c"))
        finally:
            shutil.rmtree(local)

    def exists(self, path):
        return self.web.exists(path)


@pytest.fixture(scope="module")
def plfs_on_hdfs(hdfs_cluster):
    """One file system for the module."""
    return hpcbridge.connect(f"plfs+hdfs://127.0.0.1:{hdfs_cluster.info.rpc_port}/",
                             webhdfs=f"http://127.0.0.1:{hdfs_cluster.info.http_port}", driver="native")


class TestPlfsOnHdfsConformance(FileSystemConformance):
    @pytest.fixture
    def fs(self, plfs_on_hdfs):
        return plfs_on_hdfs

    @pytest.fixture
    def root(self, hdfs_root):
        return hdfs_root

    @pytest.fixture
    def backdoor(self, hdfs_cluster):
        return WebHdfsReferenceBackdoor(hdfs_cluster.info.http_port)
