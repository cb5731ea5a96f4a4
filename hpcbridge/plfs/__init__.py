"""PLFS-style log-structured containers: N-1 checkpoints on any backend, HDFS included.

>>> import hpcbridge.plfs                                                  # doctest: +SKIP
>>> f = hpcbridge.plfs.open("plfs+hdfs://nn:9820/ckpt", "wb", comm=MPI.COMM_WORLD)  # doctest: +SKIP
>>> f.pwrite(block, rank * len(block))                                    # doctest: +SKIP
>>> f.close()                                                             # doctest: +SKIP

The format is specified in docs/plfs-format.md.
"""

from .api import open
from .container import MissingVolumesError, PlfsCorruptionError
from .reader import PlfsCorruptionWarning

__all__ = ["open", "PlfsCorruptionError", "PlfsCorruptionWarning", "MissingVolumesError"]
