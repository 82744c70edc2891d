"""Meters of a training run: the host's network bytes and CPU time, and the Chrome trace of steps.

`HostMeter` reads Linux's counters around the timed steps: bytes transmitted on all interfaces of
this host (`/proc/net/dev`, loopback included: local ranks talk over it) and busy vs. total CPU time
of all cores (`/proc/stat`, busy = everything but idle and iowait), accumulated per label so that two
runtimes measured in turn are told apart. Where the files do not exist (not Linux) it reads zeros.

`chrome_trace(ranks)` turns the trainer's events (thread, name, start, end) of every rank into a
chrome://tracing / Perfetto file: one process per rank, a `compute` thread with each layer's forward
and backward and the waits for communication, a `comm` thread with each bucket's communication.

Try it: `fabriclab train --model resnet50 --np 2 --image-size 32 --batch-size 4 --steps 3 --warmup 1 --trace /tmp/t.json`.
"""

from __future__ import annotations

import time
from pathlib import Path

NET_DEV = Path("/proc/net/dev")
PROC_STAT = Path("/proc/stat")
IDLE_FIELDS = (3, 4)  # idle and iowait in the `cpu` line of /proc/stat (proc(5))


def net_tx_bytes(path: Path = NET_DEV) -> int:
    """Bytes transmitted so far on every interface of this host."""
    try:
        lines = path.read_text().splitlines()[2:]
    except OSError:
        return 0
    # Columns after "iface:": 8 receive counters, then transmit bytes (proc(5)).
    return sum(int(line.split(":", 1)[1].split()[8]) for line in lines if ":" in line)


def cpu_ticks(path: Path = PROC_STAT) -> tuple[int, int]:
    """(busy, total) clock ticks of all cores so far."""
    try:
        fields = [int(x) for x in path.read_text().splitlines()[0].split()[1:]]
    except (OSError, IndexError, ValueError):
        return 0, 0
    total = sum(fields[:8])  # guest time is already counted in user and nice
    return total - sum(fields[i] for i in IDLE_FIELDS if i < len(fields)), total


class HostMeter:
    """Network bytes, CPU busy fraction and wall time of this host, summed per label over intervals."""

    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = {}
        self._open: tuple[str, float, int, int, int] | None = None

    def start(self, label: str) -> None:
        busy, total = cpu_ticks()
        self._open = (label, time.perf_counter(), net_tx_bytes(), busy, total)

    def stop(self) -> None:
        assert self._open is not None, "stop() without start()"
        label, t0, tx0, busy0, total0 = self._open
        busy, total = cpu_ticks()
        acc = self.totals.setdefault(label, [0.0, 0.0, 0.0, 0.0])
        for i, value in enumerate((time.perf_counter() - t0, net_tx_bytes() - tx0, busy - busy0, total - total0)):
            acc[i] += value
        self._open = None

    def summary(self, label: str) -> dict[str, float]:
        wall, tx, busy, total = self.totals.get(label, [0.0, 0.0, 0.0, 0.0])
        return {"host_tx_bytes": tx, "host_tx_Bps": tx / wall if wall else 0.0,
                "cpu_util": busy / total if total else 0.0, "metered_s": wall}


def chrome_trace(ranks: dict[int, list[tuple[str, str, float, float]]], title: str) -> dict:
    """Trace events of every rank; each rank's times are relative to its own first event."""
    tids = {"main": 0, "comm": 1}
    names = {"main": "compute (main thread)", "comm": "communication (helper thread)"}
    events: list[dict] = []
    for rank, spans in sorted(ranks.items()):
        events.append({"name": "process_name", "ph": "M", "pid": rank, "tid": 0,
                       "args": {"name": f"rank {rank}: {title}"}})
        events += [{"name": "thread_name", "ph": "M", "pid": rank, "tid": tid, "args": {"name": names[t]}}
                   for t, tid in tids.items()]
        origin = min((start for _, _, start, _ in spans), default=0.0)
        for thread, name, start, end in spans:
            cat = name.split(" ", 1)[0]
            events.append({"name": name, "cat": cat, "ph": "X", "pid": rank, "tid": tids.get(thread, 0),
                           "ts": round((start - origin) * 1e6, 3), "dur": round(max(0.0, end - start) * 1e6, 3)})
    return {"traceEvents": events, "displayTimeUnit": "ms"}
