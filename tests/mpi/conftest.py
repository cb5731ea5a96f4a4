"""Fixtures of the tests that run under mpirun: a real HDFS shared by the MPI modules."""

import pytest


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
