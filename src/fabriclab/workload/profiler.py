"""Measure a zoo model on a real device: per-layer forward and backward time, when each gradient is
ready, and the iteration time (forward + backward + SGD update) with its spread.

Two kinds of timed iterations after `warmup` untimed ones: `repeats` plain iterations give the
iteration time and its standard deviation; `repeats` hooked iterations give the per-layer times
(forward pre/post hooks on every leaf module, hooks on the autograd node of its output) and the gradient-ready
times (`Tensor.register_post_accumulate_grad_hook` on every parameter), averaged. On CUDA every
marker is a `torch.cuda.Event` recorded on the current stream and read after a synchronise, so a
time is when the GPU got there, not when Python queued the kernel (as the profiler of Zhang et al., NetAI'20, did); on
CPU it is `time.perf_counter()`. The hooks cost little host time and never synchronise (one
synchronise per iteration), so on a GPU the hooked iteration stays close to the plain one
(`profiler_hooks`; `extra["hooked_iteration_s"]` against `iteration_s` shows it).

Try it: `fabriclab profile --model resnet50 --batch-size 8 --device cpu --out resnet50.json`.
"""

from __future__ import annotations

import math
import platform
import statistics
import time
from pathlib import Path
from typing import Callable

import torch

from fabriclab.workload.models import get_model
from fabriclab.workload.models.data import synthetic_batch, training_loss
from fabriclab.workload.profile import GradReady, LayerTime, Profile
from fabriclab.workload.profiler_hooks import Clock, hooked_runs
from fabriclab.workload.trace import write_chrome_trace
from fabriclab.workload.zoo import input_shape

__all__ = ["profile_model", "measure_add_cost", "write_add_cost", "write_chrome_trace", "resolve_device",
           "device_name"]

# SGD with momentum 0.9, as tf_cnn_benchmarks and Zhang et al.'s scripts train; the learning rate is
# small because labels are random and only the time matters.
LEARNING_RATE, MOMENTUM = 1e-3, 0.9
Progress = Callable[[str], None]
# Zhang et al.'s (NetAI'20) add sizes: 40 B doubling 24 times to 640 MiB, the rows of its cuda_vec_add.log.
ADD_SIZES: tuple[int, ...] = tuple(40 * 2**k for k in range(25))


def resolve_device(device: str) -> torch.device:
    """`cpu`, `cuda` or `cuda:N` as a torch device; a ValueError when it is not usable here."""
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ValueError(f"unknown device {device!r}; use cpu, cuda or cuda:N") from None
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device {device!r} is not supported; use cpu, cuda or cuda:N")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r}: CUDA is not available here; use --device cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    return dev


def device_name(dev: torch.device) -> str:
    """A readable name: the GPU model, or the CPU model and torch's thread count."""
    if dev.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(dev)})"
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"cpu ({model}, {torch.get_num_threads()} threads)"


def _step(model, name, inputs, targets, optimizer, clock: Clock) -> dict:
    marks = {}
    optimizer.zero_grad(set_to_none=True)
    marks["start"] = clock.mark()
    loss = training_loss(name, model(inputs), targets)
    marks["backward"] = clock.mark()
    loss.backward()
    marks["update"] = clock.mark()
    optimizer.step()
    marks["end"] = clock.mark()
    return marks


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def profile_model(name: str, batch_size: int, device: str = "cpu", warmup: int = 2, repeats: int = 5, *,
                  input_size: int | None = None, num_threads: int | None = None, seed: int = 0,
                  progress: Progress | None = None) -> Profile:
    """Profile zoo model `name` training at `batch_size` on `device` (synthetic data, SGD); on the CPU
    with `num_threads` torch threads (default: torch's own choice)."""
    shape = input_shape(name, batch_size, input_size)
    if warmup < 0 or repeats < 1:
        raise ValueError(f"need warmup >= 0 and repeats >= 1, got warmup={warmup}, repeats={repeats}")
    if num_threads is not None and num_threads < 1:
        raise ValueError(f"need num_threads >= 1, got {num_threads}")
    dev = resolve_device(device)
    previous_threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        return _profile(name, batch_size, dev, warmup, repeats, shape, input_size, seed,
                        progress or (lambda message: None))
    except (RuntimeError, ValueError) as exc:  # F.batch_norm raises ValueError, kernels RuntimeError
        if "Expected more than 1 value per channel" in str(exc):
            raise ValueError(f"{name} cannot train at batch size {batch_size} with input {list(shape[1:])}: "
                             f"batch norm sees a 1x1 map; use a batch size of at least 2 or a larger "
                             f"input") from None
        raise
    finally:
        torch.set_num_threads(previous_threads)


def _profile(name, batch_size, dev, warmup, repeats, shape, input_size, seed, say: Progress) -> Profile:
    say(f"{name}, batch {batch_size}, input {'x'.join(map(str, shape[1:]))}, on {dev}: building the model")
    torch.manual_seed(seed)
    model = get_model(name).to(dev).train()
    inputs, targets = synthetic_batch(name, batch_size, input_size=input_size, device=dev, seed=seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    clock = Clock(dev)
    step = lambda: _step(model, name, inputs, targets, optimizer, clock)  # noqa: E731
    for i in range(warmup):
        say(f"warm-up {i + 1}/{warmup}")
        step()
        clock.sync()
    iteration_s, phases = [], []
    for i in range(repeats):
        say(f"iteration {i + 1}/{repeats}")
        clock.sync()
        start = time.perf_counter()
        marks = step()
        clock.sync()
        iteration_s.append(time.perf_counter() - start)
        phases.append([clock.seconds(marks["start"], marks[k]) for k in ("backward", "update", "end")])
    runs = hooked_runs(model, clock, step, repeats, say)
    return _build_profile(name, batch_size, dev, model, runs, iteration_s, phases,
                          {"input_shape": list(shape[1:]), "warmup": warmup, "repeats": repeats, "seed": seed,
                           "num_threads": torch.get_num_threads()})


def _build_profile(name, batch_size, dev, model, runs, iteration_s, phases, settings) -> Profile:
    sizes = {n: p.numel() * p.element_size() for n, p in model.named_parameters()}
    first = runs[0]
    ready = {p: _mean(run["ready"].get(p) for run in runs) for p in first["order"]}
    order = sorted(first["order"], key=lambda p: (ready[p], first["order"].index(p)))
    offset = _mean(run["backward_offset_s"] for run in runs)
    grads = tuple(GradReady(name=p, size_bytes=sizes[p], ready_s=max(ready[p] - offset, 0.0)) for p in order)
    layers, forward_starts, backward_starts = [], [], []
    owned = {m: [n for n, _ in module.named_parameters(prefix=m, recurse=False)]
             for m, module in model.named_modules() if not any(module.children())}
    for layer in first["layers"]:
        stats = [run["layers"][layer] for run in runs if layer in run["layers"]]
        layers.append(LayerTime(name=layer, param_bytes=sum(sizes[p] for p in owned[layer]),
                                forward_s=_mean(x["forward_s"] for x in stats),
                                backward_s=_mean(x["backward_s"] for x in stats) or 0.0))
        forward_starts.append(_mean(x["forward_start_s"] for x in stats))
        backward_starts.append(_mean(x["backward_start_s"] for x in stats))
    unused = sorted(set(sizes) - set(ready))
    extra = {**settings, "torch": torch.__version__, "optimizer": f"SGD(lr={LEARNING_RATE}, momentum={MOMENTUM})",
             "iteration_samples_s": iteration_s,
             "forward_s": _mean(p[0] for p in phases), "backward_s": _mean(p[1] - p[0] for p in phases),
             "update_s": _mean(p[2] - p[1] for p in phases),
             "hooked_iteration_s": _mean(run["iteration_s"] for run in runs),
             "params_without_grad": unused,
             "timeline": {"backward_offset_s": offset, "forward_start_s": forward_starts,
                          "backward_start_s": backward_starts}}
    spread = statistics.stdev(iteration_s) if len(iteration_s) > 1 else 0.0
    return Profile(model=name, device=device_name(dev), batch_size=batch_size,
                   iteration_s=statistics.fmean(iteration_s), grads=grads, layers=tuple(layers),
                   spread_s=spread, source=f"fabriclab.workload.profiler.profile_model({name!r}, "
                   f"{batch_size}, {str(dev)!r})", extra=extra)


def measure_add_cost(device: str = "cpu", sizes: tuple[int, ...] | list[int] = ADD_SIZES, *,
                     min_time_s: float = 0.02, progress: Progress | None = None) -> list[tuple[int, float]]:
    """`(bytes, seconds)` of an in-place element-wise fp32 add `a += b` of `bytes` per vector, the way a
    reduction adds a received chunk into its buffer; each size is repeated for about `min_time_s`."""
    dev = resolve_device(device)
    bad = [size for size in sizes if size < 4 or size % 4]
    if bad:
        raise ValueError(f"sizes must be whole fp32 vectors (multiples of 4 bytes), got {bad}")
    clock, rows = Clock(dev), []
    for size in sizes:
        say = progress or (lambda message: None)
        say(f"add {size} bytes")
        a = torch.rand(size // 4, device=dev)
        b = torch.rand(size // 4, device=dev)
        for _ in range(2):  # warm-up: first-touch page faults, kernel selection
            a.add_(b)
        clock.sync()
        start = time.perf_counter()
        a.add_(b)
        clock.sync()
        reps = max(3, min(1000, math.ceil(min_time_s / max(time.perf_counter() - start, 1e-7))))
        begin = clock.mark()
        for _ in range(reps):
            a.add_(b)
        end = clock.mark()
        clock.sync()
        rows.append((size, clock.seconds(begin, end) / reps))
        del a, b
    return rows


def write_add_cost(rows: list[tuple[int, float]], path: str | Path) -> Path:
    """Write `bytes,seconds` lines, the format of Zhang et al.'s `cuda_vec_add.log`; read them back with
    `fabriclab.workload.addcost.AddCost.from_log`."""
    path = Path(path)
    path.write_text("".join(f"{size},{seconds!r}\n" for size, seconds in rows))
    return path
