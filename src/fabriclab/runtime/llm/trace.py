"""A measured step of the trainer as a Chrome/Perfetto trace, in the simulated step's format
(`whatif/llm/trace.py`): the same thread names and ids (compute, tp, cp, ep, pp, dp, optimizer), one process
per rank, times in microseconds from the step's start (the earliest rank's). A pass's span on `compute`
covers the whole pass, its TP and EP calls lie inside it on their own threads; `pp` holds the receives
(transfer and bubble) and the last sends' waits.

Try it: `fabriclab train --model gpt-tiny --np 4 --pp 2 --tp 2 --gbs 8 --steps 2 --trace measured.json`, then
open it beside `fabriclab whatif llm ... --trace simulated.json` in ui.perfetto.dev.
"""

from __future__ import annotations

from fabriclab.whatif.llm.trace import THREADS


def measured_trace(spans: dict[int, list], title: str, coords: dict[int, dict] | None = None) -> dict:
    """The trace of `spans` (rank -> [(thread, name, start, end)] in perf_counter seconds)."""
    tid = {name: i for i, name in enumerate(THREADS)}
    origin = min((s[2] for ranks in spans.values() for s in ranks), default=0.0)
    events: list[dict] = []
    for rank, rank_spans in sorted(spans.items()):
        where = "" if not coords else f" (stage {coords[rank]['pp']}, tp {coords[rank]['tp']}, dp {coords[rank]['dp']})"
        events.append({"name": "process_name", "ph": "M", "pid": rank, "tid": 0,
                       "args": {"name": f"measured: {title}, rank {rank}{where}"}})
        events += [{"name": "thread_name", "ph": "M", "pid": rank, "tid": i, "args": {"name": n}}
                   for n, i in tid.items()]
        for thread, name, t0, t1 in rank_spans:
            cat = ("forward" if name.startswith("F ") else "backward") if thread == "compute" else thread
            events.append({"name": name, "cat": cat, "ph": "X", "pid": rank, "tid": tid[thread],
                           "ts": round((t0 - origin) * 1e6, 3), "dur": round((t1 - t0) * 1e6, 3)})
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"kind": "measured", "title": title}}
