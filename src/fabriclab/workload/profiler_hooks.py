"""The profiler's instruments: a clock that works on CPU and CUDA, and hooks on every leaf module and
parameter that record when each layer's forward and backward ran and when each gradient was ready.

Try it: `fabriclab profile --model alexnet --batch-size 2 --warmup 0 --repeats 1 --input-size 63`.
"""

from __future__ import annotations

import time
import warnings
from typing import Callable

import torch
from torch import nn


class Clock:
    """Markers on the host clock (CPU) or CUDA events (GPU); `seconds` needs a synchronise first."""

    def __init__(self, dev: torch.device) -> None:
        self.dev, self.cuda = dev, dev.type == "cuda"

    def mark(self):
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.dev)

    def seconds(self, start, end) -> float:
        return start.elapsed_time(end) / 1e3 if self.cuda else end - start


class Recorder:
    """Hooks on every leaf module and parameter; collects one iteration's markers at a time."""

    def __init__(self, model: nn.Module, clock: Clock) -> None:
        self.clock = clock
        self.leaves = {m: name for name, m in model.named_modules() if not any(m.children())}
        self.param_names = {p: name for name, p in model.named_parameters()}
        self.owned = {name: [n for n, _ in m.named_parameters(prefix=name, recurse=False)]
                      for m, name in self.leaves.items()}
        self.inplace = [m for m in self.leaves if isinstance(getattr(m, "inplace", None), bool) and m.inplace]
        self.handles = []
        for module in self.leaves:
            self.handles += [module.register_forward_pre_hook(self._forward_pre),
                             module.register_forward_hook(self._forward_post),
                             module.register_full_backward_pre_hook(self._backward_pre),
                             module.register_full_backward_hook(self._backward_post)]
        for param in self.param_names:
            self.handles.append(param.register_post_accumulate_grad_hook(self._grad_ready))
        for module in self.inplace:
            module.inplace = False
        self.reset()

    def reset(self) -> None:
        self.forward: dict[str, list] = {}
        self.backward: dict[str, list] = {}
        self.open: dict[str, list] = {}
        self.ready: dict[str, object] = {}

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()
        for module in self.inplace:
            module.inplace = True

    def _forward_pre(self, module, args):
        self.forward.setdefault(self.leaves[module], []).append([self.clock.mark(), None])

    def _forward_post(self, module, args, output):
        self.forward[self.leaves[module]][-1][1] = self.clock.mark()

    def _backward_pre(self, module, grad_output):
        self.open.setdefault(self.leaves[module], []).append(self.clock.mark())

    def _backward_post(self, module, grad_input, grad_output):
        name = self.leaves[module]
        if self.open.get(name):
            self.backward.setdefault(name, []).append((self.open[name].pop(), self.clock.mark()))

    def _grad_ready(self, param):
        self.ready[self.param_names[param]] = self.clock.mark()

    def resolve(self, origin, backward_mark) -> dict:
        """Seconds since `origin` (iteration start) of everything recorded; call after a sync."""
        s = lambda marker: self.clock.seconds(origin, marker)  # noqa: E731
        ready = {name: s(marker) for name, marker in self.ready.items()}
        layers = {}
        for name, calls in self.forward.items():
            bwd = self.backward.get(name, [])
            backward_s = sum(s(end) - s(start) for start, end in bwd)
            if len(bwd) == 1:  # a first layer's hook fires before its weight gradient is accumulated
                end = max([s(bwd[0][1])] + [ready[p] for p in self.owned[name] if p in ready])
                backward_s = end - s(bwd[0][0])
            layers[name] = {"forward_s": sum(s(end) - s(start) for start, end in calls),
                            "forward_start_s": s(calls[0][0]), "backward_s": backward_s,
                            "backward_start_s": min((s(start) for start, _ in bwd), default=None)}
        return {"backward_offset_s": s(backward_mark), "ready": ready, "order": list(self.ready),
                "layers": layers}


def hooked_runs(model: nn.Module, clock: Clock, step, repeats: int, say: Callable[[str], None]) -> list[dict]:
    """`repeats` iterations with every hook on; one resolved record per iteration."""
    recorder, runs = Recorder(model, clock), []
    try:
        with warnings.catch_warnings():
            # Expected for the first layer (its input needs no gradient); `resolve` accounts for it.
            warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients")
            for i in range(repeats):
                say(f"hooked iteration {i + 1}/{repeats}")
                recorder.reset()
                marks = step()
                clock.sync()
                runs.append(recorder.resolve(marks["start"], marks["backward"]))
                runs[-1]["iteration_s"] = clock.seconds(marks["start"], marks["end"])
    finally:
        recorder.close()
    return runs
