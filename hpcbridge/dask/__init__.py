"""Locality-aware Dask on any backend that reports block locations (HDFS, PLFS, POSIX layouts).

Records (``read_text``, ``read_records``, ``read_csv`` and the seeds' jobs) and arrays
(``read_hdf5``, ``open_dataset`` for NetCDF-4 / HDF5 through xarray, ``read_zarr`` for Zarr
stores, ``flash_stats`` over a FLASH-IO checkpoint; see docs/arrays.md).

Partitions follow storage blocks (small blocks on one host grouped into metablocks), every read
task is restricted softly to the Dask workers on the hosts storing its bytes, records are aligned
as Hadoop's LineRecordReader, and each job reports the bytes it read locally and remotely.
See docs/dask.md.

This package imports Dask only when one of its names is used (``import hpcbridge`` stays light).
"""

from __future__ import annotations

import importlib

__all__ = [
    "read_blocks", "read_text", "read_records", "read_csv", "plan", "job_report", "BlockBag",
    "LocalityReport", "LocalityWarning", "Partition", "Chunk", "RecordFormat",
    "teragen", "grep", "wordcount", "terasort", "validate_sort", "dummy_read", "JobResult",
    "read_hdf5", "array_report", "flash_stats", "open_dataset", "read_zarr",
]

_LOCATIONS = {
    "read_blocks": "core", "read_text": "core", "read_records": "core", "read_csv": "core", "plan": "core",
    "job_report": "core", "BlockBag": "core",
    "LocalityReport": "report", "LocalityWarning": "scheduling",
    "Partition": "partitions", "Chunk": "partitions", "RecordFormat": "partitions",
    "teragen": "jobs", "grep": "jobs", "wordcount": "jobs", "terasort": "jobs", "validate_sort": "jobs",
    "dummy_read": "jobs", "JobResult": "jobs",
    "read_hdf5": "arrays", "array_report": "arrays", "flash_stats": "flash", "open_dataset": "xarray",
    "read_zarr": "zarr_arrays",
}


def __getattr__(name: str):
    module = _LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module 'hpcbridge.dask' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
