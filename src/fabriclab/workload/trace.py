"""Chrome trace (chrome://tracing, Perfetto) of a workload profile: layer spans and gradient instants.

Threads: `forward` and `backward` hold one span per layer, `gradients` one instant per gradient when it
became ready, `iteration` one span for the measured iteration. Where the profile carries the
profiler's timeline (`extra["timeline"]`) spans start where they were measured; otherwise (a `.bk.log`
or a hand-made profile) forward spans are laid end to end and backward spans follow in reverse order.
Standard library only.

Try it: `fabriclab profile --model resnet50 --batch-size 2 --device cpu --trace resnet50.trace.json`,
then open the file in chrome://tracing or ui.perfetto.dev.
"""

from __future__ import annotations

import json
from pathlib import Path

from fabriclab.workload.profile import Profile

THREADS = ("forward", "backward", "gradients", "iteration")


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def chrome_trace(profile: Profile) -> dict:
    """The trace as a JSON-ready dict (`traceEvents`, times in microseconds)."""
    tid = {name: i for i, name in enumerate(THREADS)}
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0,
                           "args": {"name": f"{profile.model} on {profile.device}, batch {profile.batch_size}"}}]
    events += [{"name": "thread_name", "ph": "M", "pid": 0, "tid": i, "args": {"name": name}}
               for name, i in tid.items()]
    timeline = profile.extra.get("timeline") or {}
    forward_starts = timeline.get("forward_start_s") or []
    backward_starts = timeline.get("backward_start_s") or []
    if not len(forward_starts) == len(backward_starts) == len(profile.layers):
        forward_starts, t = [], 0.0
        for layer in profile.layers:
            forward_starts.append(t)
            t += layer.forward_s
        backward_starts, t = [None] * len(profile.layers), t
        for i in reversed(range(len(profile.layers))):
            backward_starts[i] = t
            t += profile.layers[i].backward_s
    backward_offset = timeline.get("backward_offset_s", sum(layer.forward_s for layer in profile.layers))
    for layer, fwd, bwd in zip(profile.layers, forward_starts, backward_starts):
        args = {"param_bytes": layer.param_bytes}
        events.append({"name": layer.name, "cat": "forward", "ph": "X", "pid": 0, "tid": tid["forward"],
                       "ts": _us(fwd), "dur": _us(layer.forward_s), "args": args})
        if bwd is not None and layer.backward_s > 0:
            events.append({"name": layer.name, "cat": "backward", "ph": "X", "pid": 0,
                           "tid": tid["backward"], "ts": _us(bwd), "dur": _us(layer.backward_s), "args": args})
    for grad in profile.grads:
        events.append({"name": grad.name, "cat": "gradient", "ph": "i", "s": "t", "pid": 0,
                       "tid": tid["gradients"], "ts": _us(backward_offset + grad.ready_s),
                       "args": {"size_bytes": grad.size_bytes}})
    events.append({"name": "iteration", "cat": "iteration", "ph": "X", "pid": 0, "tid": tid["iteration"],
                   "ts": 0.0, "dur": _us(profile.iteration_s),
                   "args": {"spread_s": profile.spread_s, "source": profile.source}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"model": profile.model, "device": profile.device, "batch_size": profile.batch_size}}


def write_chrome_trace(profile: Profile, path: str | Path) -> Path:
    """Write `profile` as a chrome://tracing JSON file."""
    path = Path(path)
    path.write_text(json.dumps(chrome_trace(profile)) + "\n")
    return path
