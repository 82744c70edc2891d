"""Progress of a run of points: done / total, rate and time left.

On a terminal one live line is rewritten in place (at most every `TTY_EVERY_S`); in a pipe or a log file a
plain line is written every `LOG_EVERY_S` (and at the end), so a batch job's log shows the run advancing
without drowning in lines. Always on stderr: stdout is the answer's. The last line sums the run up; a quick
run in this process that showed nothing says nothing (`summary=False`).

Try it: `fabriclab plan --model resnet50 --gpus 64,256,512 --processes 2 2>&1 | cat`.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

TTY_EVERY_S = 0.2
LOG_EVERY_S = 10.0


def _duration(seconds: float) -> str:
    """`42 s`, `3 min 05 s`, `2 h 07 min`."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Progress:
    """Counts finished points and says so (module doc). `resumed` points count as done from the start."""

    def __init__(self, what: str, total: int, *, resumed: int = 0, where: str = "",
                 stream: TextIO | None = None, clock=time.monotonic, summary: bool = True) -> None:
        self.what, self.total, self.resumed, self.where = what, total, resumed, where
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.clock, self.start = clock, clock()
        self.done = resumed
        self.summary = summary  # False: no last line unless a progress line was shown (a quick local run)
        self.shown = False
        self._last = -float("inf") if self.tty else self.start  # a log: the first line after LOG_EVERY_S

    def line(self) -> str:
        """`plan points: 120 / 300 (40.0%), 35.2 points/s, 5 s left [dask tcp://...]`."""
        elapsed = max(self.clock() - self.start, 1e-9)
        computed = self.done - self.resumed
        rate = computed / elapsed
        left = self.total - self.done
        eta = _duration(left / rate) if rate > 0 else "?"
        share = self.done / self.total if self.total else 1.0
        text = f"{self.what}: {self.done:,} / {self.total:,} ({share:.1%}), {rate:,.1f}/s, {eta} left"
        if self.resumed:
            text += f", {self.resumed:,} from the store"
        return text + (f" [{self.where}]" if self.where else "")

    def advance(self, count: int) -> None:
        """`count` more points finished."""
        self.done += count
        now = self.clock()
        if now - self._last >= (TTY_EVERY_S if self.tty else LOG_EVERY_S):
            self._show()
            self._last = now

    def close(self) -> None:
        """The last line (on a terminal the live line is cleared, then the summary is written once)."""
        if not (self.summary or self.shown):
            return
        elapsed = self.clock() - self.start
        text = f"{self.what}: {self.done:,} / {self.total:,} in {_duration(elapsed)}"
        if self.resumed:
            text += f" ({self.resumed:,} from the store, {self.done - self.resumed:,} run now)"
        if self.tty:
            self.stream.write("\r\033[K")
        self.stream.write(text + (f" [{self.where}]" if self.where else "") + "\n")
        self.stream.flush()

    def _show(self) -> None:
        self.shown = True
        if self.tty:
            self.stream.write("\r\033[K" + self.line())
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()
