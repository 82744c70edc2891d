"""Rank health: who arrived, who still beats, and which peer is at fault when a rank fails.

Every rank of a launch keeps a few keys in the rendezvous store (already under the launch's prefix):
`arrived/<r>` when it reached the rendezvous, `beat/<r>` a counter its `Heartbeat` thread bumps several
times per timeout, `mark/<r>` its last progress mark (`RankContext.mark`), `failed/<r>` and `done/<r>`
when it ends. From them:

* `arrive` waits at most `timeout_s` for every rank, then fails with `rank 3 never arrived within 60 s`;
* `diagnose` turns a failed rank's exception into a message that names the peers at fault: never
  arrived, silent (dead or stopped: no heartbeat for three beats), behind (did not reach this rank's
  step) or stuck (alive at this step but never joined the collective);
* `settle` keeps a store hosted by a rank up until every peer has finished, failed or gone silent, so
  they can read it to find out who is at fault.

Every wait here is bounded. The store is any object with torch's `Store` methods (`set`, `get`, `add`,
`check`); torch.distributed is imported only to recognise its communication errors.

Try it: `python -m pytest tests/runtime/test_launch.py -k dead_peer` (a killed rank named by its peers).
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import torch.distributed as dist

from fabriclab.runtime.environment import LaunchError

# Beats per timeout, at most one a second: a store round trip each, so rare enough to cost nothing.
BEATS_PER_TIMEOUT = 10
# A peer whose counter did not move for this many beats is silent (dead or stopped).
SILENT_BEATS = 3


class Heartbeat:
    """Bumps `beat/<rank>` in the store several times per timeout from a thread of its own.

    A blocked collective releases the GIL, so a live rank keeps beating; a dead or stopped one does not."""

    def __init__(self, store, rank: int, timeout_s: float) -> None:
        self.store, self.rank = store, rank
        self.interval_s = min(1.0, timeout_s / BEATS_PER_TIMEOUT)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._beat, name="fabriclab-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while True:
            try:
                self.store.add(f"beat/{self.rank}", 1)
            except Exception:  # the store is gone: the launch is over either way
                return
            if self._stop.wait(self.interval_s):
                return

    def stop(self) -> None:
        """Stop beating and wait (bounded) for the thread: a daemon thread still inside a store call when
        the interpreter shuts down is killed while unwinding C++ frames, which aborts the process."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5 * self.interval_s + 1.0)


def missing_ranks(store, world_size: int) -> list[int]:
    """Ranks that have not reached the rendezvous (no `arrived/<r>` key)."""
    return [r for r in range(world_size) if not store.check([f"arrived/{r}"])]


def arrive(store, rank: int, world_size: int, timeout_s: float) -> None:
    """Announce `rank` and wait at most `timeout_s` for every rank; raise `LaunchError` naming the absent."""
    store.set(f"arrived/{rank}", "1")
    count = store.add("arrivals", 1)
    deadline = time.monotonic() + timeout_s
    while count < world_size:
        if time.monotonic() > deadline:
            missing = missing_ranks(store, world_size)
            message = f"{ranks_text(missing)} never arrived within {timeout_s:g} s (rank {rank} waited)"
            store.set(f"failed/{rank}", message)
            raise LaunchError(message, ranks=missing)
        time.sleep(0.05)
        count = store.add("arrivals", 0)


def settle(store, world_size: int, limit_s: float, interval_s: float) -> None:
    """Keep the store (hosted here) up until every rank that arrived has finished, failed or gone silent,
    for at most `limit_s`."""
    deadline = time.monotonic() + limit_s
    last_beat: dict[int, tuple[int, float]] = {}
    while time.monotonic() < deadline:
        try:
            pending = [r for r in range(world_size) if store.check([f"arrived/{r}"])
                       and not store.check([f"done/{r}"]) and not store.check([f"failed/{r}"])]
            now = time.monotonic()
            for r in pending:
                beat = store.add(f"beat/{r}", 0)
                if last_beat.get(r, (None, 0.0))[0] != beat:
                    last_beat[r] = (beat, now)
        except Exception:  # nothing left to keep alive for
            return
        if all(now - last_beat[r][1] > SILENT_BEATS * interval_s for r in pending):
            return
        time.sleep(0.05)


def diagnose(store, rank: int, world_size: int, ctx: Any, exc: BaseException,
             interval_s: float) -> LaunchError:
    """The error of a failed rank, naming the peers at fault: never arrived, silent (dead or stopped),
    behind (did not reach this rank's step) or stuck (alive at this step, but neither failed nor done
    while this rank timed out waiting); peers that failed as well are listed after them.

    `ctx` is the rank's `RankContext` (its `step` and `label`), None when it failed before having one."""
    where = f" at step {ctx.step} ({ctx.label})" if ctx is not None and ctx.step else ""
    head = f"rank {rank} failed{where}: {type(exc).__name__}: {first_line(exc)}"
    try:
        store.set(f"failed/{rank}", head)
        if not is_comm_error(exc):
            return LaunchError(head, [rank])  # its own error: the peers are merely waiting for it
        before = [store.add(f"beat/{r}", 0) for r in range(world_size)]
        time.sleep(SILENT_BEATS * interval_s)  # a live peer has bumped its counter by then
        after = [store.add(f"beat/{r}", 0) for r in range(world_size)]
        culprits, failed = [], []
        for r in range(world_size):
            if r == rank or store.check([f"done/{r}"]):
                continue
            if not store.check([f"arrived/{r}"]):
                culprits.append((r, f"rank {r} never arrived"))
            elif after[r] == before[r]:
                culprits.append((r, f"rank {r} stopped responding (no heartbeat for "
                                    f"{SILENT_BEATS * interval_s:.1f} s: dead or stopped)"))
            elif store.check([f"failed/{r}"]):
                failed.append(r)
            elif ctx is not None and ctx.step:
                culprits.append((r, _progress_note(store, r, ctx.step, ctx.label)))
            else:
                culprits.append((r, f"rank {r} is alive but neither failed nor finished"))
    except Exception:  # the store went away with its host
        return LaunchError(f"{head}; the rendezvous store is unreachable, so the process hosting it (rank 0 "
                           f"or the launching parent) is gone", [0])
    notes = [note for _, note in culprits]
    if failed:
        notes.append(f"also failed: {ranks_text(failed)}")
    if not culprits:
        notes.insert(0, "no peer is at fault" if failed else "every peer is alive and at the same step")
    return LaunchError(f"{head}; " + "; ".join(notes), [r for r, _ in culprits] or [rank])


def _progress_note(store, peer: int, step: int, label: str) -> str:
    """Where a live peer is, against this rank's `step` (`label`)."""
    mark = store.get(f"mark/{peer}").decode() if store.check([f"mark/{peer}"]) else "0 start"
    at, _, at_label = mark.partition(" ")
    if int(at) < step:
        return f"rank {peer} did not reach step {step} ({label}); it is at step {at} ({at_label})"
    return f"rank {peer} is alive at step {at} ({at_label}) but never joined the collective"


def is_comm_error(exc: BaseException) -> bool:
    """A failure of communication (timeout, closed connection) rather than of the rank's own code."""
    return isinstance(exc, dist.DistError) or (isinstance(exc, RuntimeError) and re.search(
        r"timed? ?out|timeout|connection|closed|peer|socket|broken pipe|reset", str(exc), re.I) is not None)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, without Gloo's C++ source location."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else repr(exc)
    # Gloo prefixes its messages with the C++ source location: `[.../unbound_buffer.cc:78] Timed out ...`.
    return re.sub(r"^\[[^\]]*\.(?:cc|cpp|h):\d+\]\s*", "", line)


def ranks_text(ranks: list[int]) -> str:
    """`rank 3` or `ranks 1, 3`."""
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))
