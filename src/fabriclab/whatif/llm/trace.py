"""A simulated LLM step as a Chrome/Perfetto trace: one rank of the slowest pipeline stage.

Threads, the same a measured step of the LLM trainer writes so the two lie side by side: `compute` holds
one span per forward (F) or backward (B) pass of a model chunk and micro-batch; `tp`, `cp`, `ep` and `dp`
the exposed communication of each pass (laid after its compute: the model knows how long it is exposed,
not when inside the pass), `dp` also the stage's parameter gathers and gradient reductions as they run
beside the passes, `optimizer` the optimizer step. Times in microseconds. Standard library only.

Try it: `fabriclab whatif llm --model llama3-8b --gpus 16 --pp 2 --gbs 32 --trace step.json`, then open
step.json in ui.perfetto.dev.
"""

from __future__ import annotations

import json
from pathlib import Path

THREADS = ("compute", "tp", "cp", "ep", "pp", "dp", "optimizer")


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def step_trace(answer) -> dict:
    """The trace as a JSON-ready dict."""
    result, par = answer.result, answer.par
    s = result.critical_stage
    tid = {name: i for i, name in enumerate(THREADS)}
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0,
                           "args": {"name": f"simulated: {answer.spec.name}, {par.describe()}, stage {s}"}}]
    events += [{"name": "thread_name", "ph": "M", "pid": 0, "tid": i, "args": {"name": n}} for n, i in tid.items()]
    run = result.pipeline
    for (kind, chunk, mb), t0, t1 in zip(run.ops[s], run.start_s[s], run.end_s[s]):
        cost = result.passes[(s, chunk, kind)]
        name = f"{'FB'[kind]} chunk {chunk} mb {mb}"
        events.append({"name": name, "cat": "forward" if kind == 0 else "backward", "ph": "X", "pid": 0,
                       "tid": tid["compute"], "ts": _us(t0), "dur": _us(cost.compute_s),
                       "args": {"chunk": chunk, "micro_batch": mb}})
        t = t0 + cost.compute_s
        for comm, dur in cost.exposed_s.items():
            if dur > 0:
                events.append({"name": f"{comm} {name}", "cat": comm, "ph": "X", "pid": 0, "tid": tid[comm],
                               "ts": _us(t), "dur": _us(dur)})
                t += dur
    for name, t0, t1 in result.dp_intervals[s]:
        events.append({"name": name, "cat": "dp", "ph": "X", "pid": 0, "tid": tid["dp"], "ts": _us(t0),
                       "dur": _us(t1 - t0)})
    end = result.step_time_s - result.optimizer_s
    events.append({"name": "optimizer step", "cat": "optimizer", "ph": "X", "pid": 0, "tid": tid["optimizer"],
                   "ts": _us(end), "dur": _us(result.optimizer_s)})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"kind": "simulated", "model": answer.spec.name, "parallel": par.describe(),
                          "stage": s, "step_time_s": result.step_time_s}}


def write_trace(answer, path: str | Path) -> dict:
    """Write the trace to `path`; returns it."""
    trace = step_trace(answer)
    Path(path).write_text(json.dumps(trace) + "\n")
    return trace
