"""HDF5 datasets on any hpcbridge backend, read from their bytes (no MPI, no HDF5 driver needed).

- :func:`describe`: shape, type, filters and storage of a dataset (h5py over an hpcbridge file
  object with a block cache), and the index of its chunks (parsed from the version-1 B-tree),
  cached per file version.
- :func:`read_region`: a hyperslab into a numpy array, from raw bytes read through hpcbridge,
  with deflate, shuffle and Fletcher-32 decoded here; :func:`map_region`: a hyperslab that is one
  run of a contiguous dataset as a view of a memory map (where the file system maps files).

This package knows only :mod:`hpcbridge.fs`; :func:`hpcbridge.dask.read_hdf5` builds on it.
See docs/arrays.md.
"""

from .btree import ChunkIndex, read_btree_index
from .cache import BlockCacheFile
from .dataset import DatasetInfo, describe, map_region, open_cached, read_region
from .errors import (ChecksumError, DatasetNotFoundError, HDF5Error, HDF5FormatError, NotHDF5Error,
                     UnsupportedFilterError)
from .filters import Filter, fletcher32

__all__ = ["ChunkIndex", "read_btree_index", "BlockCacheFile", "DatasetInfo", "describe", "map_region",
           "open_cached", "read_region", "ChecksumError", "DatasetNotFoundError", "HDF5Error", "HDF5FormatError",
           "NotHDF5Error", "UnsupportedFilterError", "Filter", "fletcher32"]
