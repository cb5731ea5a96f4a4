"""Exceptions of hpcbridge.hdf5: each names the file's URL (and the dataset where it applies)."""

from __future__ import annotations

from ..errors import HpcbridgeError

__all__ = ["HDF5Error", "HDF5FormatError", "NotHDF5Error", "DatasetNotFoundError", "UnsupportedFilterError",
           "ChecksumError"]


class HDF5Error(HpcbridgeError, ValueError):
    """An HDF5 file or dataset hpcbridge cannot read."""


class HDF5FormatError(HDF5Error):
    """Bytes that do not follow the HDF5 file format (or a part of it not supported here)."""


class NotHDF5Error(HDF5FormatError):
    """The file is not an HDF5 file."""


class DatasetNotFoundError(HDF5Error, KeyError):
    """No dataset of that name in the file."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnsupportedFilterError(HDF5Error):
    """A dataset's filter pipeline has a filter hpcbridge does not decode."""


class ChecksumError(HDF5Error):
    """A chunk's Fletcher-32 checksum does not match its bytes."""
