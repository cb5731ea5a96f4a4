"""The FLASH analytics job: statistics of a FLASH-IO checkpoint as a locality-aware Dask job.

A FLASH-IO checkpoint (benchmarks/flash_io.py, examples/demo.py) holds one dataset per unknown
(``dens``, ``pres``, ``temp``, ...) of shape ``(blocks, nzb, nyb, nxb)``, and the list of
unknowns in ``unknown names``. :func:`flash_stats` reads every variable with
:func:`~hpcbridge.dask.read_hdf5` (blocks of the checkpoint follow its storage and run where
their bytes live), computes per-variable min / max / mean in one pass and a histogram of one
variable in a second, and returns them with the locality report of both passes.
:func:`flash_stats_h5py` computes the same serially with h5py on a local file (the reference).
"""

from __future__ import annotations

import time
import uuid

import numpy as np

from ..fs.api import url_to_fs
from ..hdf5 import DatasetNotFoundError, NotHDF5Error
from ..hdf5.dataset import require_h5py, open_cached
from ..hdf5.layout import read_superblock
from .jobs import JobResult, _compute
from .report import collect_report
from .scheduling import DEFAULT_BALANCE, current_client

__all__ = ["flash_stats", "flash_stats_h5py", "flash_variables", "plot_histogram"]


def _variables_of(h5, url: str) -> list[str]:
    names = []
    if "unknown names" in h5:
        names = [n.decode(errors="replace") for n in np.asarray(h5["unknown names"][()]).reshape(-1)]
        missing = [n for n in names if n not in h5]
        if missing and len(missing) < len(names):
            # A checkpoint that lists a variable it lacks is damaged (a writer stopped early):
            # statistics that silently leave it out would pass for the whole checkpoint's.
            raise DatasetNotFoundError(f"{url} has no dataset for the unknown name(s) "
                                       f"{', '.join(map(repr, missing))} it lists")
        names = [n for n in names if n in h5]
    if not names:  # not a FLASH checkpoint's header: every 4-D dataset of the root group
        names = sorted(k for k, v in h5.items() if getattr(v, "ndim", 0) == 4)
    return names


def flash_variables(url: str, storage_options: dict | None = None) -> list[str]:
    """The variable datasets of a FLASH checkpoint, as named in the file (``unknown names``;
    else every 4-D dataset of the root group)."""
    fs, path = url_to_fs(url, **(storage_options or {}))
    h5py = require_h5py(url)
    with open_cached(fs, path) as f:
        read_superblock(f, url)  # NotHDF5Error naming the URL
        try:
            h5 = h5py.File(f, "r")
        except OSError as exc:
            raise NotHDF5Error(f"{url} cannot be opened as an HDF5 file: {exc}") from None
        with h5:
            names = _variables_of(h5, url)
    if not names:
        raise ValueError(f"{url} has no FLASH variables (no 'unknown names' and no 4-D datasets)")
    return names


def _label(name: str) -> str:
    return name.strip()


def flash_stats(url: str, variables: list[str] | None = None, *, histogram: str | None = None, bins: int = 50,
                client=None, locality: bool = True, balance: float | None = DEFAULT_BALANCE,
                partition_size: int | None = None, storage_options: dict | None = None,
                job: str | None = None, memory_map: bool = True) -> JobResult:
    """Per-variable min / max / mean and a histogram of one variable of a FLASH checkpoint.

    Parameters
    ----------
    url:
        The checkpoint (any backend URL).
    variables:
        Variable datasets (default: all, from ``unknown names``); names may omit FLASH's
        trailing blanks (``"f1"`` for ``"f1  "``).
    histogram:
        The variable to histogram (default: ``dens`` if present, else the first).
    bins:
        Equal-width bins between the variable's min and max.
    client, locality, balance, partition_size, storage_options, job, memory_map:
        As for :func:`~hpcbridge.dask.read_hdf5` (``memory_map=False`` for a checkpoint that may
        be rewritten while the job runs).

    Returns
    -------
    JobResult
        ``value`` = ``{"variables": {name: {"min", "max", "mean"}}, "histogram": {"variable",
        "edges", "counts"}, "blocks": N, "cells": N}``; ``report`` = locality of all reads.
    """
    import dask.array as da

    from .arrays import read_hdf5

    if isinstance(bins, bool) or not isinstance(bins, int) or bins <= 0:
        raise ValueError(f"bins must be a positive integer for {url}, got {bins!r}")
    started = time.perf_counter()
    names = flash_variables(url, storage_options)
    by_label = {_label(n): n for n in names}
    if variables is not None:
        if not variables:
            raise ValueError(f"no variables asked of {url} (variables: {', '.join(by_label)})")
        missing = [v for v in variables if v not in names and v not in by_label]
        if missing:
            raise DatasetNotFoundError(f"{url} has no variable {', '.join(map(repr, missing))} "
                                       f"(variables: {', '.join(by_label)})")
        names = [v if v in names else by_label[v] for v in variables]
    target = histogram if histogram is not None else ("dens" if "dens" in by_label else _label(names[0]))
    if target not in by_label and target not in names:
        raise DatasetNotFoundError(f"{url} has no variable {target!r} to histogram (variables: {', '.join(by_label)})")
    target = by_label.get(target, target)
    job = job or uuid.uuid4().hex[:12]
    # The histogram's variable is read even when it is not among ``variables``: its bins need its
    # min and max, computed in the same pass as the statistics.
    arrays = {n: read_hdf5(url, n, locality=locality, client=client, storage_options=storage_options,
                           partition_size=partition_size, balance=balance, job=job, memory_map=memory_map)
              for n in dict.fromkeys([*names, target])}
    empty = [_label(n) for n, a in arrays.items() if a.size == 0]
    if empty:  # numpy's min/max refuse an empty array too; say which file and variable
        raise ValueError(f"{url}: variable {', '.join(map(repr, empty))} has no cells (shape "
                         f"{arrays[by_label.get(empty[0], empty[0])].shape}): no min/max/mean/histogram")
    stats = []
    for n in names:
        a = arrays[n]
        stats += [a.min(), a.max(), a.mean()]
    hist_array = arrays[target]
    stats += [hist_array.min(), hist_array.max()]
    values = _compute(client, *stats)
    result = {_label(n): {"min": float(values[3 * i]), "max": float(values[3 * i + 1]),
                          "mean": float(values[3 * i + 2])} for i, n in enumerate(names)}
    edges = _bin_edges(values[-2], values[-1], bins, hist_array.dtype, url, _label(target))
    counts, _ = da.histogram(hist_array, bins=edges)
    (counts,) = _compute(client, counts)
    first = arrays[names[0]]
    value = {"variables": result,
             "histogram": {"variable": _label(target), "edges": edges.tolist(),
                           "counts": np.asarray(counts).astype(int).tolist()},
             "blocks": int(first.shape[0]), "cells": int(first.size)}
    report = collect_report(job, current_client(client))
    return JobResult("flash", value, time.perf_counter() - started, report,
                     sum(a.npartitions for a in arrays.values()), {"url": url, "locality_on": locality})


def _bin_edges(lo, hi, bins: int, dtype, url: str, variable: str) -> np.ndarray:
    """The edges ``numpy.histogram(data, bins)`` uses for data of ``dtype`` whose min and max are
    ``lo`` and ``hi``: numpy computes them in the data's float type (float32 for a plotfile,
    ``linspace`` in float32 steps, not float64 edges rounded) and widens a constant field by half a
    unit each side; counting against other edges moves values that lie near an edge."""
    try:
        return np.histogram_bin_edges(np.array([lo, hi], dtype=dtype), bins=bins)
    except ValueError as exc:  # NaN or inf: numpy cannot place equal-width bins either
        raise ValueError(f"{url}: cannot histogram {variable!r}: {exc} (NaN or inf values)") from None


def flash_stats_h5py(path: str, variables: list[str] | None = None, histogram: str | None = None,
                     bins: int = 50) -> dict:
    """:func:`flash_stats`'s ``value`` computed serially with h5py on a local file (the reference)."""
    import h5py

    with h5py.File(path, "r") as h5:
        names = _variables_of(h5, path)
        by_label = {_label(n): n for n in names}
        if variables is not None:
            names = [v if v in names else by_label[v] for v in variables]
        result = {}
        for n in names:
            data = h5[n][()]
            result[_label(n)] = {"min": float(data.min()), "max": float(data.max()), "mean": float(data.mean())}
        target = histogram if histogram is not None else ("dens" if "dens" in by_label else _label(names[0]))
        target = by_label.get(target, target)
        data = h5[target][()]
        counts, edges = np.histogram(data, bins=bins)
        return {"variables": result, "histogram": {"variable": _label(target), "edges": edges.tolist(),
                                                   "counts": counts.astype(int).tolist()},
                "blocks": int(data.shape[0]), "cells": int(data.size)}


def plot_histogram(value: dict, png: str, title: str = "") -> str:
    """Write the histogram of a :func:`flash_stats` value as a PNG (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hist = value["histogram"]
    edges, counts = np.asarray(hist["edges"]), np.asarray(hist["counts"])
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", edgecolor="black", linewidth=0.3)
    ax.set_xlabel(hist["variable"])
    ax.set_ylabel("cells")
    ax.set_title(title or f"histogram of {hist['variable']}")
    fig.tight_layout()
    fig.savefig(png, format="png")
    plt.close(fig)
    return png
