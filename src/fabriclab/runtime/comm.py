"""The helper threads that do a rank's communication while its main thread computes (S-Caffe SC-OBR).

A `CommThread` runs its jobs one after another in submission order, so collectives are issued in the
same order on every rank, and only this thread issues communication on its process group: the main
thread never touches that group (it waits on events), which is what keeps Gloo safe (a process group
must not see two threads' collectives interleaved differently on two ranks). Each thread has a process
group of its own (`dist.new_group`), so the main thread's collectives (barriers, metric gathers, DDP in
the same process) never share one.

`CommThreads` runs k such threads and the trainer gives bucket i to thread i mod k on every rank: k
buckets are in flight at once (Gloo's own process group runs 2 collectives at a time), while each
group still sees one fixed order.

A job is a function; it may wait for events set by the main thread (a bucket's gradients are ready)
and set events the main thread waits for (a layer's parameters have arrived). Its communication time
is what it reports with `add_span`: waiting for the main thread is not communication. An exception
in a job is re-raised in the main thread by `wait_all`, and every later job fails fast: a dead peer makes
the whole step fail with the executor's (named) error, never a hang. `on_start` runs first on each thread
(the trainer sets the thread's CUDA device and stream there: both are per thread).

Try it: `fabriclab train --model resnet50 --np 2 --image-size 32 --batch-size 4 --steps 3 --warmup 1 --overlap backward`.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable


class CommError(RuntimeError):
    """Communication failed on the helper thread; the message is the original error's."""


class Job:
    """One submitted function and its completion."""

    def __init__(self, fn: Callable[[], None], name: str) -> None:
        self.fn, self.name = fn, name
        self.done = threading.Event()
        self.error: BaseException | None = None


class CommThread:
    """A daemon thread that runs submitted jobs in order."""

    def __init__(self, name: str = "fabriclab-comm", on_start: Callable[[], None] | None = None) -> None:
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.failed: BaseException | None = None
        self._on_start = on_start
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], None], name: str = "job") -> Job:
        job = Job(fn, name)
        self._queue.put(job)
        return job

    def close(self, timeout_s: float = 5.0) -> None:
        """End the thread after its last job and wait for it (bounded), so that it is not inside a
        C++ call when the interpreter shuts down (that aborts the process)."""
        self._queue.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout_s)

    def _loop(self) -> None:
        if self._on_start is not None:
            try:
                self._on_start()
            except BaseException as exc:  # every job then fails with it, in the main thread
                self.failed = exc
        while True:
            job = self._queue.get()
            if job is None:
                return
            if self.failed is not None:
                job.error = self.failed
            else:
                try:
                    job.fn()
                except BaseException as exc:  # handed to the main thread, which decides
                    job.error = self.failed = exc
            job.done.set()


class CommThreads:
    """k `CommThread`s; job j of a `submit_each` runs on thread j, and every job records its
    communication spans in one list (list.append is atomic)."""

    def __init__(self, count: int, on_start: Callable[[int], None] | None = None) -> None:
        """`on_start(j)` runs first on thread j (per-thread state such as the CUDA device and stream)."""
        self.threads = [CommThread(f"fabriclab-comm-{j}", None if on_start is None else (lambda j=j: on_start(j)))
                        for j in range(count)]
        self.spans: list[tuple[str, float, float]] = []
        """(name, start, end) perf_counter seconds of every `add_span` since the last `take_spans`."""

    def __len__(self) -> int:
        return len(self.threads)

    @property
    def failed(self) -> BaseException | None:
        return next((t.failed for t in self.threads if t.failed is not None), None)

    def submit_each(self, make: Callable[[int], Callable[[], None]], name: str) -> list[Job]:
        """Submit `make(j)` to thread j for every j; returns the jobs in thread order."""
        return [t.submit(make(j), f"{name} ({j})") for j, t in enumerate(self.threads)]

    def wait_all(self, jobs: list[Job], timeout_s: float) -> None:
        """Block until every job is done; re-raise the first error (a failure on one thread fails the
        others' waits fast too). `timeout_s` bounds a wait that nothing ends (the process group's own
        timeout normally fires first and names the missing peer)."""
        for job in jobs:
            if self.failed is not None and not job.done.is_set():
                failed = self.failed
                raise CommError(f"{type(failed).__name__}: {failed}") from failed
            if not job.done.wait(timeout_s):
                raise CommError(f"communication job {job.name!r} did not finish within {timeout_s:g} s")
            if job.error is not None:
                raise CommError(f"{type(job.error).__name__}: {job.error}") from job.error

    def add_span(self, name: str, start: float, end: float) -> None:
        """Record a piece of communication of a job (for the step's comm time and the trace)."""
        self.spans.append((name, start, end))

    def take_spans(self) -> list[tuple[str, float, float]]:
        spans = list(self.spans)
        del self.spans[:len(spans)]
        return spans

    def close(self) -> None:
        for t in self.threads:
            t.close()


def wait_event(event: threading.Event, threads: CommThreads, timeout_s: float, what: str) -> None:
    """Wait for an event a helper thread sets, failing fast if a helper thread of `threads` failed."""
    deadline = time.monotonic() + timeout_s
    while not event.wait(0.05):
        if threads.failed is not None:
            raise CommError(f"{type(threads.failed).__name__}: {threads.failed}") from threads.failed
        if time.monotonic() > deadline:
            raise CommError(f"{what} did not arrive within {timeout_s:g} s")
