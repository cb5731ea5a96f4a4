"""Fixtures and helpers of the tests that run under mpirun (``make test`` runs them on 4 ranks).

* ``comm``: the communicator a test runs on, COMM_SELF (every rank runs the test alone, the
  one-process case every MPI code meets) and COMM_WORLD; ``world`` for tests that need every rank.
* ``directory_for(comm, base)``: where a test on ``comm`` writes (each rank its own under COMM_SELF).
* ``BACKENDS`` and ``backend_url``, ``make_directory``: the one list of storage backends of the MPI
  tests, their URLs, their directories.
* ``run_on_all_ranks``: any exception on any rank becomes a failure on every rank, never a hang.
* ``backing``: a real HDFS that rank 0 starts once for the session.
"""

import os
import sys
import time
import traceback

import pytest


@pytest.fixture(params=["COMM_SELF", "COMM_WORLD"])
def comm(request):
    """COMM_SELF (each rank alone, running the same test) and COMM_WORLD."""
    from mpi4py import MPI

    return getattr(MPI, request.param)


@pytest.fixture
def world():
    """COMM_WORLD, for tests that need every rank together."""
    from mpi4py import MPI

    return MPI.COMM_WORLD


def directory_for(comm, base) -> str:
    """The directory a test on ``comm`` writes in: ``base`` (the same on every rank: pytest-mpi's
    ``mpi_tmp_path``), shared by the ranks of ``comm``; under COMM_SELF, where every rank runs the
    test alone, a subdirectory of the rank's own so they do not write the same files."""
    from mpi4py import MPI

    if comm.Compare(MPI.COMM_SELF) == MPI.IDENT:
        path = os.path.join(str(base), f"self-{MPI.COMM_WORLD.rank}")
        os.makedirs(path, exist_ok=True)
        return path
    return str(base)


#: The storage backends of the MPI tests: POSIX, PLFS on POSIX, PLFS on the session's real HDFS.
BACKENDS = [pytest.param("posix", id="posix"), pytest.param("plfs-posix", id="plfs-posix"),
            pytest.param("plfs-hdfs", id="plfs-hdfs", marks=pytest.mark.hdfs)]
#: The PLFS ones, and the ones on local storage.
PLFS_BACKENDS = [b for b in BACKENDS if b.values[0].startswith("plfs")]
LOCAL_BACKENDS = [b for b in BACKENDS if not b.values[0].endswith("hdfs")]


def backend_url(backend: str, directory: str, name: str, backing=None) -> tuple[str, dict]:
    """``(url, storage options)`` of file ``name`` in ``directory`` on ``backend`` (one of
    :data:`BACKENDS`); ``plfs-hdfs`` needs the ``backing`` fixture, and the directory made on HDFS
    first (:func:`make_directory`)."""
    if backend == "posix":
        return f"file://{directory}/{name}", {}
    if backend == "plfs-posix":
        return f"plfs+file://{directory}/{name}", {}
    if backend == "plfs-hdfs":
        url, webhdfs = backing["hdfs"]
        return url.replace("hdfs://", "plfs+hdfs://") + f"{directory}/{name}", {"webhdfs": webhdfs}
    raise ValueError(f"unknown MPI test backend {backend!r}: one of posix, plfs-posix, plfs-hdfs")


def make_directory(comm, backend: str, directory: str, backing=None) -> None:
    """Rank 0 of ``comm`` makes ``directory`` on ``backend``'s storage (on HDFS for ``plfs-hdfs``;
    locally it exists); every rank of ``comm`` returns once it exists."""
    if backend == "plfs-hdfs" and comm.rank == 0:
        import hpcbridge

        url, webhdfs = backing["hdfs"]
        hpcbridge.connect(url, webhdfs=webhdfs).mkdir(directory, parents=True, exist_ok=True)
    comm.Barrier()


def take_files(oracle_path: str, url: str, options: dict) -> tuple[bytes, bytes]:
    """``(bytes of the oracle's file, bytes of hpcbridge's)``, both files removed after (call on
    one rank, once every rank has closed them)."""
    import hpcbridge

    with open(oracle_path, "rb") as f:
        want = f.read()
    fs, path = hpcbridge.url_to_fs(url, **options)
    with fs.open(path, "rb") as f:
        got = f.read()
    os.remove(oracle_path)
    fs.rm(path, recursive=True)
    return want, got


_CONFIGS = []  # the pytest config, for _to_terminal


def pytest_configure(config):
    _CONFIGS.append(config)


def _to_terminal(message: str) -> None:
    """Print to the process's real stderr, past pytest's capture (whose output an abort loses)."""
    for config in _CONFIGS:
        capture = config.pluginmanager.getplugin("capturemanager")
        if capture is not None:
            capture.suspend_global_capture(in_=False)
    print(message, file=sys.stderr, flush=True)


class OtherRankFailed(AssertionError):
    """Raised on the ranks where a function passed to :func:`run_on_all_ranks` did not fail, naming
    the ranks where it did and their errors."""


#: Seconds a rank whose function raised waits for the others before aborting the MPI job (they
#: are then stuck in a collective the failed rank will never join).
AGREEMENT_PATIENCE = 60.0


def run_on_all_ranks(comm, function, *args):
    """``function(*args)`` on every rank of ``comm``; if it raises on any rank, it raises on all.

    The rank whose call raised re-raises its own exception; the others raise
    :class:`OtherRankFailed` naming it. Ranks agree through a non-blocking barrier: a rank whose
    call raised while another is still inside a collective call of ``function`` (waiting for
    the failed rank, which will never come) waits :data:`AGREEMENT_PATIENCE` seconds, prints its
    error and aborts the MPI job, so the run fails instead of hanging.
    """
    from mpi4py import MPI

    error = None
    try:
        result = function(*args)
    except BaseException as exc:  # pytest's outcomes (fail, skip, timeout) are BaseExceptions
        error, result = exc, None
    request = comm.Ibarrier()
    deadline = time.monotonic() + AGREEMENT_PATIENCE
    while not request.Test():
        if error is not None and time.monotonic() > deadline:
            _to_terminal(f"rank {MPI.COMM_WORLD.rank}: {function.__name__} raised and the other ranks did not "
                         f"join within {AGREEMENT_PATIENCE:g} s (they wait in a collective call this rank "
                         "left): aborting the MPI job\n"
                         + "".join(traceback.format_exception(error)))
            MPI.COMM_WORLD.Abort(1)
        time.sleep(0.005)
    messages = comm.allgather(None if error is None else f"{type(error).__name__}: {error}")
    if error is not None:
        raise error
    failed = [(rank, message) for rank, message in enumerate(messages) if message is not None]
    if failed:
        raise OtherRankFailed("; ".join(f"rank {rank} failed: {message}" for rank, message in failed))
    return result


@pytest.fixture(scope="session")
def backing():
    """Backing stores for the MPI tests: the POSIX directory, and a real HDFS that rank 0 starts
    once for the session (and stops by pid at its end). ``backing["hdfs"]`` is
    ``(url, webhdfs_url)``."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    cluster, info = None, None
    if comm.rank == 0:
        import tempfile

        from hpcbridge.testbed import HdfsCluster

        try:
            cluster = HdfsCluster(tempfile.mkdtemp(prefix="hpcbridge-mpi-hdfs-"), datanodes=3)
            started = cluster.up()
            info = (started.url, f"http://127.0.0.1:{started.http_port}")
        except Exception as exc:  # every rank must learn it, or the others would wait forever
            info = ("error", repr(exc))
    info = comm.bcast(info, root=0)
    try:
        if info[0] == "error":
            pytest.fail(f"the HDFS testbed did not start: {info[1]}")
        yield {"posix": None, "hdfs": info}
    finally:
        comm.Barrier()
        if cluster is not None:
            cluster.down()
