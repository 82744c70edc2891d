"""The helper thread that does a rank's communication while its main thread computes (S-Caffe SC-OBR).

Jobs run one after another in submission order, so collectives are issued in the same order on every
rank, and only this thread issues communication on the trainer's process group while a job is in
flight: the main thread never touches that group then (it waits on events), which is what keeps Gloo
safe (a process group must not see two threads' collectives interleaved differently on two ranks).
The trainer uses a process group of its own for this thread (`dist.new_group`), so the main thread's
own collectives (barriers, metric gathers, DDP in the same process) never share it.

A job is a function; it may wait for events set by the main thread (a bucket's gradients are ready)
and set events the main thread waits for (a layer's parameters have arrived). Its communication time
is what it reports with `add_span`: waiting for the main thread is not communication. An exception
in a job is re-raised in the main thread by `wait`, and every later job fails fast: a dead peer makes
the whole step fail with the executor's (named) error, never a hang.

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
    """A daemon thread that runs submitted jobs in order and times their communication spans."""

    def __init__(self, name: str = "fabriclab-comm") -> None:
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.spans: list[tuple[str, float, float]] = []
        """(name, start, end) perf_counter seconds of every `add_span` since the last `take_spans`."""
        self.failed: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], None], name: str = "job") -> Job:
        job = Job(fn, name)
        self._queue.put(job)
        return job

    def wait(self, job: Job, timeout_s: float) -> None:
        """Block until `job` is done; re-raise its error. `timeout_s` bounds a wait that nothing ends
        (the process group's own timeout normally fires first and names the missing peer)."""
        if not job.done.wait(timeout_s):
            raise CommError(f"communication job {job.name!r} did not finish within {timeout_s:g} s")
        if job.error is not None:
            raise CommError(f"{type(job.error).__name__}: {job.error}") from job.error

    def add_span(self, name: str, start: float, end: float) -> None:
        """Record a piece of communication of a job (for the step's comm time and the trace)."""
        self.spans.append((name, start, end))

    def take_spans(self) -> list[tuple[str, float, float]]:
        spans, self.spans = self.spans, []
        return spans

    def close(self) -> None:
        self._queue.put(None)

    def _loop(self) -> None:
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


def wait_event(event: threading.Event, thread: CommThread, timeout_s: float, what: str) -> None:
    """Wait for an event the helper thread sets, failing fast if the helper thread failed."""
    deadline = time.monotonic() + timeout_s
    while not event.wait(0.05):
        if thread.failed is not None:
            raise CommError(f"{type(thread.failed).__name__}: {thread.failed}") from thread.failed
        if time.monotonic() > deadline:
            raise CommError(f"{what} did not arrive within {timeout_s:g} s")
