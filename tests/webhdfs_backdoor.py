"""Reading and writing HDFS over WebHDFS REST, independent of hdfs-native (the conformance backdoor)."""

import json
import urllib.error
import urllib.parse
import urllib.request

from hpcbridge.testing import Backdoor


class WebHdfsBackdoor(Backdoor):
    def __init__(self, http_port: int, user: str = "root"):
        self.base = f"http://127.0.0.1:{http_port}/webhdfs/v1"
        self.user = user

    def _url(self, path, op, **params):
        query = urllib.parse.urlencode({"op": op, "user.name": self.user, **params})
        return f"{self.base}{urllib.parse.quote(path)}?{query}"

    def write(self, path, data):
        # Two steps, as WebHDFS specifies: the NameNode names a DataNode, the data goes there.
        request = urllib.request.Request(self._url(path, "CREATE", overwrite="true", noredirect="true"), method="PUT")
        with urllib.request.urlopen(request, timeout=30) as response:
            location = json.load(response)["Location"]
        with urllib.request.urlopen(urllib.request.Request(location, data=data, method="PUT"), timeout=60) as response:
            assert response.status == 201

    def read(self, path):
        with urllib.request.urlopen(self._url(path, "OPEN"), timeout=60) as response:
            return response.read()

    def exists(self, path):
        try:
            with urllib.request.urlopen(self._url(path, "GETFILESTATUS"), timeout=30):
                return True
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return False
            raise
