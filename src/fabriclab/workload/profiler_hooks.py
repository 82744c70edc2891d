"""The profiler's instruments: a clock that works on CPU and CUDA, and hooks on every leaf module and
parameter that record when each layer's forward and backward ran and when each gradient was ready.

The hooks must cost little host time, or a GPU that the host keeps busy in a plain iteration idles in
a hooked one and the per-layer times carry the hooks' cost (measured on an H100 with module full
backward hooks and a fresh CUDA event per marker: ResNet-50 at batch 64 went from 37.9 to 68.4 ms).
So: a layer's backward is timed by hooks on the autograd node that made its output (a pre-hook when
the node starts, a hook when it ends; one C++-to-Python call each) instead of module full backward
hooks, which wrap every input and output in an extra autograd function and forbid in-place
activations; CUDA markers are events from a pool reused every iteration, recorded without any
synchronise; the iteration synchronises once at its end and reads every event's elapsed time then.

Try it: `fabriclab profile --model alexnet --batch-size 2 --warmup 0 --repeats 1 --input-size 63`.
"""

from __future__ import annotations

import time
from typing import Callable

import torch
from torch import nn


class Clock:
    """Markers on the host clock (CPU) or CUDA events (GPU); `seconds` needs a synchronise first.

    CUDA events come from a pool: `rewind` (once the markers handed out were read) makes them reusable,
    so a hooked iteration neither creates nor destroys an event."""

    def __init__(self, dev: torch.device) -> None:
        self.dev, self.cuda = dev, dev.type == "cuda"
        self._events: list = []
        self._next = 0

    def rewind(self) -> None:
        self._next = 0

    def mark(self):
        if not self.cuda:
            return time.perf_counter()
        if self._next == len(self._events):
            self._events.append(torch.cuda.Event(enable_timing=True))
        event = self._events[self._next]
        self._next += 1
        event.record()
        return event

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.dev)

    def seconds(self, start, end) -> float:
        return start.elapsed_time(end) / 1e3 if self.cuda else end - start


class Recorder:
    """Hooks on every leaf module and parameter; collects one iteration's markers at a time.

    A leaf's backward runs from the start to the end of the autograd node that produced its output (hooked
    at each forward call); when that node is not the last of the layer's backward (a linear layer on
    3-D input ends in a view), the layer's own gradients being ready ends it (`resolve`)."""

    def __init__(self, model: nn.Module, clock: Clock) -> None:
        self.clock = clock
        self.leaves = {m: name for name, m in model.named_modules() if not any(m.children())}
        self.param_names = {p: name for name, p in model.named_parameters()}
        self.owned = {name: [n for n, _ in m.named_parameters(prefix=name, recurse=False)]
                      for m, name in self.leaves.items()}
        self.handles = []
        for module in self.leaves:
            self.handles += [module.register_forward_pre_hook(self._forward_pre),
                             module.register_forward_hook(self._forward_post)]
        for param in self.param_names:
            self.handles.append(param.register_post_accumulate_grad_hook(self._grad_ready))
        self.reset()

    def reset(self) -> None:
        self.clock.rewind()
        self.forward: dict[str, list] = {}
        self.backward: dict[str, list] = {}
        self.ready: dict[str, object] = {}

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()

    def _forward_pre(self, module, args):
        self.forward.setdefault(self.leaves[module], []).append([self.clock.mark(), None])

    def _forward_post(self, module, args, output):
        name = self.leaves[module]
        self.forward[name][-1][1] = self.clock.mark()
        node = _grad_fn(output)
        if node is not None:  # this call's backward: [start, end], filled in by the node's hooks
            span = [None, None]
            self.backward.setdefault(name, []).append(span)
            node.register_prehook(lambda grad_outputs, span=span: self._set(span, 0))
            node.register_hook(lambda grad_inputs, grad_outputs, span=span: self._set(span, 1))

    def _set(self, span: list, end: int) -> None:
        span[end] = self.clock.mark()

    def _grad_ready(self, param):
        self.ready[self.param_names[param]] = self.clock.mark()

    def resolve(self, origin, backward_mark) -> dict:
        """Seconds since `origin` (iteration start) of everything recorded; call after a sync."""
        s = lambda marker: self.clock.seconds(origin, marker)  # noqa: E731
        ready = {name: s(marker) for name, marker in self.ready.items()}
        layers = {}
        for name, calls in self.forward.items():
            bwd = [(a, b) for a, b in self.backward.get(name, []) if a is not None and b is not None]
            backward_s = sum(s(end) - s(start) for start, end in bwd)
            if len(bwd) == 1:  # the weight gradient is accumulated after the node (or a later one) ran
                end = max([s(bwd[0][1])] + [ready[p] for p in self.owned[name] if p in ready])
                backward_s = end - s(bwd[0][0])
            layers[name] = {"forward_s": sum(s(end) - s(start) for start, end in calls),
                            "forward_start_s": s(calls[0][0]), "backward_s": backward_s,
                            "backward_start_s": min((s(start) for start, _ in bwd), default=None)}
        return {"backward_offset_s": s(backward_mark), "ready": ready, "order": list(self.ready),
                "layers": layers}


def _grad_fn(output):
    """The autograd node that produced a module's output (its first tensor that has one), or None."""
    if isinstance(output, torch.Tensor):
        return output.grad_fn
    if isinstance(output, (tuple, list)):
        return next((t.grad_fn for t in output if isinstance(t, torch.Tensor) and t.grad_fn is not None), None)
    if isinstance(output, dict):
        return _grad_fn(list(output.values()))
    return None


def hooked_runs(model: nn.Module, clock: Clock, step, repeats: int, say: Callable[[str], None]) -> list[dict]:
    """`repeats` iterations with every hook on; one resolved record per iteration."""
    recorder, runs = Recorder(model, clock), []
    try:
        for i in range(repeats):
            say(f"hooked iteration {i + 1}/{repeats}")
            recorder.reset()
            marks = step()
            clock.sync()  # the iteration's one synchronise: every marker is read after it
            runs.append(recorder.resolve(marks["start"], marks["backward"]))
            runs[-1]["iteration_s"] = clock.seconds(marks["start"], marks["end"])
    finally:
        recorder.close()
    return runs
