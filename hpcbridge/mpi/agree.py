"""Collective agreement on errors: no rank goes on to communicate when another rank's checks failed."""

from __future__ import annotations

import pickle

import numpy as np

__all__ = ["agree"]


def agree(comm, error: BaseException | None) -> None:
    """One ``Allreduce``: the lowest rank whose checks failed, if any, sends its exception to
    every rank and every rank raises it (the failing rank its own)."""
    from mpi4py import MPI

    mine = np.array([comm.rank if error is not None else comm.size], dtype=np.int64)
    first = np.empty(1, dtype=np.int64)
    comm.Allreduce(mine, first, op=MPI.MIN)
    root = int(first[0])
    if root == comm.size:
        return
    payload = None
    if comm.rank == root:
        try:
            payload = pickle.dumps(error)
        except Exception:
            payload = pickle.dumps(RuntimeError(f"{type(error).__name__}: {error}"))
    payload = comm.bcast(payload, root=root)
    if error is not None:
        raise error  # a rank that failed raises its own exception
    try:
        theirs = pickle.loads(payload)
    except Exception:  # an exception class that does not unpickle
        theirs = RuntimeError(f"rank {root} failed (its exception could not be sent)")
    raise theirs
