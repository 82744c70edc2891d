"""What a rank's step spends, as the simulator names it: spans on the threads compute, tp, cp, ep, pp, dp
and optimizer, with the bytes each communicator sent.

Every collective of the trainer runs through `Meter.timed`, which times it (blocking calls on this
rank: the time a rank spends in them is exactly its exposed communication) and adds the bytes this rank
put on the wire (the payload it hands the collective, as nccl-tests count a call's size).

Try it: `fabriclab train --model gpt-tiny --np 2 --tp 2 --steps 2 --trace step.json`.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

THREADS = ("compute", "tp", "cp", "ep", "pp", "dp", "optimizer")


class Meter:
    """Spans and byte counts of one rank; `reset` at the start of each step."""

    def __init__(self, sync=None) -> None:
        self.sync = sync
        """Called at every span's ends (torch.cuda.synchronize on a GPU, where collectives are asynchronous)."""
        self.reset()

    def reset(self) -> None:
        self.spans: list[tuple[str, str, float, float]] = []  # (thread, name, start, end)
        self.time_s: dict[str, float] = defaultdict(float)
        self.bytes: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.origin = time.perf_counter()

    @contextmanager
    def timed(self, thread: str, name: str, size_bytes: float = 0.0):
        if self.sync is not None:
            self.sync()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            if self.sync is not None:
                self.sync()
            t1 = time.perf_counter()
            self.add(thread, name, t0, t1, size_bytes)

    def add(self, thread: str, name: str, t0: float, t1: float, size_bytes: float = 0.0) -> None:
        self.spans.append((thread, name, t0, t1))
        self.time_s[thread] += t1 - t0
        self.bytes[thread] += size_bytes
        self.calls[thread] += 1


def nbytes(tensor) -> int:
    return tensor.numel() * tensor.element_size()
