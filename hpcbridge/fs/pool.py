"""One bounded pool of worker threads per connection, with a timeout on every call.

Remote clients can block for a long time (hdfs-native retries a dead NameNode without end), and
a fresh thread per call leaked memory in the JVM client PLFS-on-HDFS used (seed 003, 3.1.1).
Every client call of a connection goes through one :class:`CallPool`: a fixed number of daemon
threads (a call stuck in a dead service never blocks interpreter exit), and the caller waits at
most ``timeout`` seconds before getting :class:`~hpcbridge.errors.BackendUnavailable`.

A thread can ask for its calls to run on itself instead (:func:`calls_on_this_thread`): code that
runs while holding a lock another thread's garbage collection may need must never wait for
another thread. h5py holds its global lock while it calls a Python file object, and a pool thread
that starts a cyclic garbage collection freeing h5py objects waits for that lock: a read waiting
for that thread deadlocked until its timeout (h5py #2019; seen as a README tour failure).

Threads idle for :data:`IDLE_EXIT` seconds leave (a pool makes them again on demand), so a
process that opens many connections keeps no thread per connection it stopped using.

Daemon threads have one hazard at exit: a call inside a native client that released the GIL
(hdfs-native, through PyO3) and returns while the interpreter finalizes makes CPython < 3.14 end
the thread with ``pthread_exit``, whose unwinding through Rust frames aborts the whole process
("FATAL: exception not rethrown", seen at the end of a test run). So at exit, before finalization
starts, the process waits a bounded time for calls in flight to finish (:func:`_drain_at_exit`).
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures
import contextlib
import os
import queue
import threading
import time
import weakref
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from ..errors import BackendUnavailable

__all__ = ["CallPool", "calls_on_this_thread", "calls_inline"]

# How long exit waits for calls in flight (a stuck call on a dead service is given up on: it only
# aborts the process if it happens to return during the short finalization that follows).
EXIT_GRACE = 10.0
_POOLS: "weakref.WeakSet[CallPool]" = weakref.WeakSet()
_worker = threading.local()  # .pool: the pool whose worker the current thread is; .inline: depth
#: Seconds an idle worker thread waits for a call before it leaves.
IDLE_EXIT = 30.0
_EXIT_HOOK = []  # registered once, when the first pool is made (no work at import time)


def _drain_at_exit(grace: float = EXIT_GRACE) -> None:
    """Wait until no pool has a call in flight, at most ``grace`` seconds (runs from atexit)."""
    deadline = time.monotonic() + grace
    for pool in list(_POOLS):
        with pool._lock:
            while pool._in_flight and pool._finished.wait(max(0.0, deadline - time.monotonic())):
                pass


@contextlib.contextmanager
def calls_on_this_thread():
    """Inside the block, every :meth:`CallPool.call` and :meth:`CallPool.submit` of this thread
    runs on this thread, without a timeout.

    For code that runs holding a lock which other threads may need: h5py holds its global lock
    while it calls a Python file object, and a worker thread whose allocation starts a cyclic
    garbage collection that frees h5py objects waits for that lock; a caller waiting for that
    worker would wait until its timeout (h5py #2019). Nests.
    """
    depth = getattr(_worker, "inline", 0)
    _worker.inline = depth + 1
    try:
        yield
    finally:
        _worker.inline = depth


def calls_inline() -> bool:
    """Whether this thread's pool calls run on it (inside :func:`calls_on_this_thread`)."""
    return getattr(_worker, "inline", 0) > 0


class CallPool:
    """A fixed set of daemon threads running calls, each with a deadline for its caller.

    Parameters
    ----------
    workers:
        Number of threads (the bound on concurrent calls of one connection).
    name:
        Names the threads and, in errors, the service (e.g. ``hdfs://nn:9820``).
    """

    def __init__(self, workers: int = 8, name: str = "hpcbridge"):
        if workers < 1:
            raise ValueError(f"a call pool needs at least one worker, got {workers}")
        self.workers = workers
        self.name = name
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._finished = threading.Condition(self._lock)  # notified when a call ends
        self._in_flight = 0
        self._threads = 0
        self._idle: list[queue.SimpleQueue] = []  # a stack: the most recently idle worker first
        self._backlog: collections.deque = collections.deque()
        _POOLS.add(self)
        if not _EXIT_HOOK:
            _EXIT_HOOK.append(atexit.register(_drain_at_exit))

    @classmethod
    def _after_fork_in_child(cls) -> None:
        # A forked child inherits the pools but none of their threads: start over (queued calls
        # belonged to the parent's callers).
        for pool in list(_POOLS):
            pool._reset()

    # The most recently idle worker takes the next call (LIFO). A stream of one-at-a-time calls
    # then always runs on the same thread, which hdfs-native serves markedly faster than calls
    # rotating over threads (measured: 650 against 460 MB/s for 1 MiB reads).
    def _work(self, inbox: queue.SimpleQueue) -> None:
        # The first task comes through the inbox too: a Thread keeps its ``args`` while it runs.
        _worker.pool = self
        task = inbox.get()
        while True:
            if task is None:  # idle for IDLE_EXIT seconds: leave, unless a call is being handed over
                with self._lock:
                    if inbox in self._idle:
                        self._idle.remove(inbox)
                        self._threads -= 1
                        return
                task = inbox.get()
            future, function, args, kwargs = task
            outcome = None
            if future.set_running_or_notify_cancel():
                try:
                    outcome = (True, function(*args, **kwargs))
                except BaseException as exc:  # handed to the caller
                    outcome = (False, exc)
            # Drop the call's arguments before waking the caller: an idle thread holding them
            # would keep a memoryview of the caller's buffer alive (a bytearray read into could
            # then not be resized: BufferError), and any large argument in memory.
            task = function = args = kwargs = None
            # Become idle *before* waking the caller, so its next call finds this thread.
            with self._lock:
                self._in_flight -= 1
                self._finished.notify_all()
                task = self._backlog.popleft() if self._backlog else None
                if task is None:
                    self._idle.append(inbox)
            if outcome is not None:
                if outcome[0]:
                    future.set_result(outcome[1])
                else:
                    future.set_exception(outcome[1])
            future = outcome = None  # nor its result, once the caller has it
            if task is None:
                try:
                    task = inbox.get(timeout=IDLE_EXIT)
                except queue.Empty:
                    pass

    def submit(self, function, *args, **kwargs) -> Future:
        """Queue a call; returns its Future (threads start on demand, up to ``workers``).

        Inside :func:`calls_on_this_thread` the call runs now, and the Future returned is done."""
        future: Future = Future()
        if calls_inline():
            future.set_running_or_notify_cancel()
            try:
                future.set_result(function(*args, **kwargs))
            except BaseException as exc:  # handed to the caller, as from a worker
                future.set_exception(exc)
            return future
        self._queue(future, function, args, kwargs)
        return future

    def _queue(self, future: Future, function, args, kwargs) -> None:
        task = (future, function, args, kwargs)
        with self._lock:
            self._in_flight += 1
            if self._idle:
                self._idle.pop().put(task)
            elif self._threads < self.workers:
                self._threads += 1
                inbox: queue.SimpleQueue = queue.SimpleQueue()
                inbox.put(task)
                threading.Thread(target=self._work, args=(inbox,), daemon=True,
                                 name=f"{self.name}-{self._threads}").start()
            else:
                self._backlog.append(task)

    def call(self, timeout: float | None, what: str, function, *args, **kwargs):
        """Run ``function(*args, **kwargs)`` on the pool and wait at most ``timeout`` seconds.

        Raises
        ------
        BackendUnavailable
            If the call does not finish in time (``what`` and the service name the operation).
        """
        if getattr(_worker, "pool", None) is self or calls_inline():
            # A call from one of this pool's own threads (a background prefetch reading through
            # the connection) runs right here: queueing it would hold this thread waiting for
            # another, and enough such callers would starve the pool until every timeout. So do
            # calls inside calls_on_this_thread() (see there).
            return function(*args, **kwargs)
        future: Future = Future()  # made first: a signal landing anywhere below finds it
        try:
            self._queue(future, function, args, kwargs)
            return future.result(timeout=timeout)
        except FutureTimeout:
            future.cancel()
            raise BackendUnavailable(
                f"{self.name} did not answer {what} within {timeout:g} s (service down or unreachable?)"
            ) from None
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM) while the call runs: let it end first, bounded by its
            # timeout. The caller's cleanup (closing the handle, removing a partial file) then
            # finds the client object free: using it while this thread still did failed in
            # hdfs-native with "Already borrowed" and the process aborted.
            if not future.cancel():
                concurrent.futures.wait([future], timeout=timeout)
            raise


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=CallPool._after_fork_in_child)
