"""One bounded pool of worker threads per connection, with a timeout on every call.

Remote clients can block for a long time (hdfs-native retries a dead NameNode without end), and
a fresh thread per call leaked memory in the JVM client PLFS-on-HDFS used (seed 003, 3.1.1).
Every client call of a connection goes through one :class:`CallPool`: a fixed number of daemon
threads (a call stuck in a dead service never blocks interpreter exit), and the caller waits at
most ``timeout`` seconds before getting :class:`~hpcbridge.errors.BackendUnavailable`.
"""

from __future__ import annotations

import queue
import threading
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

    def __init__(self, workers: int = 8, name: str = "hpcbridge"):
        if workers < 1:
            raise ValueError(f"a call pool needs at least one worker, got {workers}")
        self.workers = workers
        self.name = name
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def _start(self) -> None:
        with self._lock:
            while len(self._threads) < self.workers:
                thread = threading.Thread(target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def _work(self) -> None:
        while True:
            future, function, args, kwargs = self._tasks.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function(*args, **kwargs))
            except BaseException as exc:  # handed to the caller
                future.set_exception(exc)

    def submit(self, function, *args, **kwargs) -> Future:
        """Queue a call; returns its Future (threads start on first use)."""
        if not self._threads:
            self._start()
        future: Future = Future()
        self._tasks.put((future, function, args, kwargs))
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
