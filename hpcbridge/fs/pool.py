"""One bounded pool of worker threads per connection, with a timeout on every call.

Remote clients can block for a long time (hdfs-native retries a dead NameNode without end), and
a fresh thread per call leaked memory in the JVM client PLFS-on-HDFS used (seed 003, 3.1.1).
Every client call of a connection goes through one :class:`CallPool`: a fixed number of daemon
threads (a call stuck in a dead service never blocks interpreter exit), and the caller waits at
most ``timeout`` seconds before getting :class:`~hpcbridge.errors.BackendUnavailable`.
"""

from __future__ import annotations

import collections
import os
import queue
import threading
import weakref
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from ..errors import BackendUnavailable

__all__ = ["CallPool"]


class CallPool:
    """A fixed set of daemon threads running calls, each with a deadline for its caller.

    Parameters
    ----------
    workers:
        Number of threads (the bound on concurrent calls of one connection).
    name:
        Names the threads and, in errors, the service (e.g. ``hdfs://nn:9820``).
    """

    _pools: "weakref.WeakSet[CallPool]" = weakref.WeakSet()

    def __init__(self, workers: int = 8, name: str = "hpcbridge"):
        if workers < 1:
            raise ValueError(f"a call pool needs at least one worker, got {workers}")
        self.workers = workers
        self.name = name
        self._reset()
        CallPool._pools.add(self)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._threads = 0
        self._idle: list[queue.SimpleQueue] = []  # a stack: the most recently idle worker first
        self._backlog: collections.deque = collections.deque()

    @classmethod
    def _after_fork_in_child(cls) -> None:
        # A forked child inherits the pools but none of their threads: start over (queued calls
        # belonged to the parent's callers).
        for pool in list(cls._pools):
            pool._reset()

    # The most recently idle worker takes the next call (LIFO). A stream of one-at-a-time calls
    # then always runs on the same thread, which hdfs-native serves markedly faster than calls
    # rotating over threads (measured: 650 against 460 MB/s for 1 MiB reads).
    def _work(self, task) -> None:
        inbox: queue.SimpleQueue = queue.SimpleQueue()
        while True:
            future, function, args, kwargs = task
            outcome = None
            if future.set_running_or_notify_cancel():
                try:
                    outcome = (True, function(*args, **kwargs))
                except BaseException as exc:  # handed to the caller
                    outcome = (False, exc)
            # Become idle *before* waking the caller, so its next call finds this thread.
            with self._lock:
                task = self._backlog.popleft() if self._backlog else None
                if task is None:
                    self._idle.append(inbox)
            if outcome is not None:
                if outcome[0]:
                    future.set_result(outcome[1])
                else:
                    future.set_exception(outcome[1])
                outcome = None
            if task is None:
                task = inbox.get()

    def submit(self, function, *args, **kwargs) -> Future:
        """Queue a call; returns its Future (threads start on demand, up to ``workers``)."""
        future: Future = Future()
        task = (future, function, args, kwargs)
        with self._lock:
            if self._idle:
                self._idle.pop().put(task)
            elif self._threads < self.workers:
                self._threads += 1
                threading.Thread(target=self._work, args=(task,), daemon=True,
                                 name=f"{self.name}-{self._threads}").start()
            else:
                self._backlog.append(task)
        return future

    def call(self, timeout: float | None, what: str, function, *args, **kwargs):
        """Run ``function(*args, **kwargs)`` on the pool and wait at most ``timeout`` seconds.

        Raises
        ------
        BackendUnavailable
            If the call does not finish in time (``what`` and the service name the operation).
        """
        future = self.submit(function, *args, **kwargs)
        try:
            return future.result(timeout=timeout)
        except FutureTimeout:
            future.cancel()
            raise BackendUnavailable(
                f"{self.name} did not answer {what} within {timeout:g} s (service down or unreachable?)"
            ) from None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=CallPool._after_fork_in_child)
