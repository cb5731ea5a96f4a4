"""The unified file API: one FileSystem interface, pluggable backends chosen by URL scheme.

>>> import hpcbridge
>>> fs = hpcbridge.connect("file:///tmp")            # POSIX mount (local, OrangeFS, Lustre, GPFS)
>>> fs.capabilities.concurrent_writers
True
"""

from .api import connect, open, url_to_fs
from .base import FileSystem
from .file import OpenMode, RawFile
from .registry import backend_class, known_schemes, register_backend
from .types import BlockLocation, Capabilities, FileInfo, FileType
from .url import URL, parse_url

__all__ = [
    "connect",
    "open",
    "url_to_fs",
    "FileSystem",
    "OpenMode",
    "RawFile",
    "BlockLocation",
    "Capabilities",
    "FileInfo",
    "FileType",
    "URL",
    "parse_url",
    "register_backend",
    "backend_class",
    "known_schemes",
]
