"""Chunks a user gives an array reader (``chunks=``), read as ``dask.array.from_array`` reads
them: anything ``normalize_chunks`` takes (ints, -1, None, "auto", byte sizes, dicts, explicit
block sizes), with dask's own ``array.chunk-size`` for "auto", then checked as ``from_array``
checks them: blocks that are not sizes of the array (negative, or not adding up to its shape)
are an error, not an array of another shape."""

from __future__ import annotations

__all__ = ["user_chunks"]


def user_chunks(chunks, shape: tuple, dtype, previous: tuple | None, where: str) -> tuple:
    """``chunks`` for an array of ``shape`` stored in ``previous`` chunks (aligned to them where
    dask aligns "auto"); ValueError naming ``where`` if they are not blocks of the array."""
    from dask.array.core import normalize_chunks

    try:
        out = normalize_chunks(chunks, shape, dtype=dtype, previous_chunks=previous)
    except (ValueError, TypeError, ZeroDivisionError) as exc:
        raise ValueError(f"bad chunks {chunks!r} for {where} of shape {shape}: {exc}") from None
    if any(n < 0 for c in out for n in c) or tuple(map(sum, out)) != tuple(shape):
        raise ValueError(f"bad chunks {chunks!r} for {where} of shape {shape}: blocks {out} are not "
                         "non-negative sizes adding up to the shape")
    return out
