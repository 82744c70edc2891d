"""A data-parallel trainer around any torch model: S-Caffe's three designs, DDP's and Horovod's overlap.

`DataParallelTrainer(model, loss_fn, config, example=(x, y)).step(x, y)` runs one SGD step on this
rank's batch and aggregates gradients over the process group as `config.sync` says (see
`fabriclab.runtime.sync`), bucket by bucket (`fabriclab.runtime.buckets`), on `config.comm_threads`
helper threads, each with a process group of its own (`fabriclab.runtime.comm`). Overlap, `config.overlap`:

* `none` (S-Caffe SC-B): forward, backward, then every bucket's communication, then the update; with
  `reduce` sync the root then broadcasts the updated parameters before the step ends (`sharded`: every
  rank allgathers the blocks the others updated).
* `forward` (SC-OB, `reduce` and `sharded` sync): the parameter broadcasts (allgathers) of every bucket
  start at the beginning of the next step, in forward order, and a layer's forward waits for its own
  buckets only.
* `backward` (SC-OBR; what DDP and Horovod do): a bucket is handed to a helper thread as soon as
  autograd has accumulated its last gradient, while backward goes on; with `reduce` and `sharded` sync
  the parameters' return overlaps the next forward as in SC-OB.

With `reduce` or `sharded` sync and forward/backward overlap, the last update reaches the other ranks
when the next step starts; `finish()` propagates it (call it before reading the parameters). After `finish()`
every rank holds the same parameters, which equal single-process SGD on the concatenated batches
(`tests/runtime/test_trainer_correctness.py`). Batch-norm running statistics stay per rank.

`config.device` cuda trains on the rank's current GPU (the launcher picks the GPU of its local rank):
the model, the flat buckets and the batches live there, each helper thread communicates on a CUDA
stream of its own, ordered with the compute stream by events (`fabriclab.runtime.streams`).
`config.precision` bf16/fp16 runs forward and loss under autocast; fp16 also scales the loss and skips
a step with inf/nan gradients on every rank alike (`fabriclab.runtime.precision`).
`config.channels_last` puts convolution weights and image batches in NHWC order.

`step` returns the loss; `last_stats` holds the step's wall, compute, communication and exposed
communication seconds and the bytes this rank's schedules sent.

Try it: `fabriclab train --model resnet50 --np 4 --image-size 32 --batch-size 8 --steps 5 --warmup 1 --sync allreduce:ring --overlap backward`.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import torch
import torch.distributed as dist
from torch import nn

from fabriclab.runtime.buckets import FlatLayout, FlatSGD, plan_buckets
from fabriclab.runtime.comm import CommThreads, wait_event
from fabriclab.runtime.devices import compute_device, device_backend
from fabriclab.runtime.executor import BufferPool
from fabriclab.runtime.precision import LossScaler, autocast, nonfinite_flag, prepare_batch, prepare_model
from fabriclab.runtime.streams import StreamOrder
from fabriclab.runtime.sync import DEFERRED, ROOT, BucketSync, SyncSpec
from fabriclab.runtime.trainer_config import OVERLAPS, TrainerConfig

__all__ = ["OVERLAPS", "DataParallelTrainer", "TrainerConfig"]


class DataParallelTrainer:
    """SGD on `model` over all ranks of the default process group (or alone without one).

    `example` (one batch) lets rank 0 probe the gradients' backward order and ready times, which the
    time-based fusion policies need; without it the order is the reverse of `model.parameters()`.
    `trace` records every layer's compute and every bucket's communication in `events`."""

    def __init__(self, model: nn.Module, loss_fn: Callable, config: TrainerConfig, *,
                 example: tuple | None = None, trace: bool = False) -> None:
        self.model, self.loss_fn, self.config = model, loss_fn, config
        self.spec = SyncSpec.parse(config.sync)
        self.size = dist.get_world_size() if dist.is_initialized() else 1
        self.spec.check(self.size)
        self.rank = dist.get_rank() if self.size > 1 else 0
        self.device = compute_device(config.device)
        prepare_model(model, self.device, config.channels_last)
        if example is not None:
            example = prepare_batch(example, self.device, config.channels_last)
        # A group per helper thread: nothing else ever issues collectives on it. Under NCCL one thread:
        # NCCL queues every bucket on the GPU without blocking the host, so one thread keeps them all in
        # flight, while kernels of several communicators queued in different orders on different ranks
        # can wait on each other for good (NCCL's documentation on concurrent communicators).
        threads = config.comm_threads if self.size > 1 else 0
        if threads and self.device.type == "cuda" and device_backend(None, self.device) == "nccl":
            threads = 1
        self.groups = [dist.new_group(list(range(self.size))) for _ in range(threads)]
        self.group = self.groups[0] if self.groups else None
        # fp16: the overflow flag's all-reduce, on the main thread, on a group of its own.
        self.scaler = LossScaler() if config.precision == "fp16" else None
        self.flag_group = dist.new_group(list(range(self.size))) if self.scaler and self.size > 1 else None
        if self.device.type == "cuda":
            for g in self.groups:  # NCCL: each group's communicator built by every rank (see runtime.launch)
                dist.all_reduce(torch.zeros(1, device=self.device), group=g)
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ValueError("the model has no trainable parameters")
        order, ready = self._probe(params, example)
        self.names = _param_names(model)
        params = [params[i] for i in order]
        sizes = plan_buckets([p.numel() * p.element_size() for p in params], ready, config.policy)
        self.layout = FlatLayout(params, sizes)
        self.sgd = FlatSGD(self.layout, config.sgd)
        k = max(threads, 1)  # buckets take turns over the helper threads' groups and buffer pools
        self.pools = [BufferPool() for _ in range(k)]
        self.order = StreamOrder(self.device, threads, len(self.layout.buckets))
        self.comm = CommThreads(threads, on_start=self.order.thread_start) if self.size > 1 else None
        if self.size > 1:
            dist.broadcast(self.layout.flat_params, group=self.group, group_src=ROOT)
        self.syncs = [BucketSync(self.spec, self.layout.flat_grads[b.start:b.stop],
                                 self.layout.flat_params[b.start:b.stop],
                                 group=self.groups[i % k] if self.groups else None,
                                 compression=config.compression, segment_bytes=config.segment_bytes,
                                 pool=self.pools[i % k]) for i, b in enumerate(self.layout.buckets)]
        self.bytes_per_step = sum(s.grad_bytes + s.param_bytes for s in self.syncs)
        self.trace = trace
        self.events: list[tuple[str, str, float, float]] = []
        """(thread, name, start, end) of the last step when tracing: compute on `main`, comm on `comm`."""
        self.last_stats: dict[str, float] = {}
        self._ready = [threading.Event() for _ in self.layout.buckets]
        self._arrived = [threading.Event() for _ in self.layout.buckets]
        for e in self._arrived:  # parameters are in place until a propagation starts
            e.set()
        self._propagation = None
        self._pending: list[int] = []
        self._seen: list[bool] = []
        self._stale = False
        self._wait_s = 0.0
        self._last_ready = 0.0
        self._handles = [p.register_post_accumulate_grad_hook(self._grad_hook(i)) for i, p in enumerate(params)]
        self._install_forward_hooks()

    # -- set-up ----------------------------------------------------------------------------------
    def _probe(self, params: list[nn.Parameter], example) -> tuple[list[int], list[float] | None]:
        """Backward order of the gradients and their ready times, from one iteration on rank 0."""
        if example is None:
            return list(reversed(range(len(params)))), None
        index = {p: i for i, p in enumerate(params)}
        seen: list[tuple[int, float]] = []
        cuda = self.device.type == "cuda"

        def ready(p) -> None:
            if cuda:  # when the GPU has the gradient, not when the host queued it (one probe iteration)
                torch.cuda.synchronize(self.device)
            seen.append((index[p], time.perf_counter()))

        handles = [p.register_post_accumulate_grad_hook(ready) for p in params]
        inputs, targets = example
        with autocast(self.device, self.config.precision):
            loss = self.loss_fn(self.model(inputs), targets)
        loss.backward()
        start = time.perf_counter() if not seen else min(t for _, t in seen)
        for h in handles:
            h.remove()
        for p in params:
            p.grad = None
        first: dict[int, float] = {}
        for i, t in seen:  # a parameter used twice accumulates twice: its first time counts
            first.setdefault(i, t - start)
        end = max(first.values(), default=0.0)
        order = list(first) + [i for i in reversed(range(len(params))) if i not in first]
        times = list(first.values()) + [end] * (len(params) - len(first))
        if self.size > 1:  # every rank must cut the same buckets: rank 0's order and times rule
            shared = torch.tensor([order, times], dtype=torch.float64)
            dist.broadcast(shared, group=self.group, group_src=ROOT)
            order, times = [int(i) for i in shared[0].tolist()], shared[1].tolist()
        return order, times

    def _grad_hook(self, i: int):
        bucket, flat = self.layout.bucket_of[i], self.layout.grad_slice(i)
        name = self.names.get(self.layout.params[i], str(i))

        def hook(param) -> None:
            if self._seen[i]:  # a parameter used twice: its second gradient adds to the first
                flat.add_(param.grad)
            else:
                flat.copy_(param.grad)
            param.grad = None  # the flat slice holds it now; freeing it early saves memory
            now = time.perf_counter()
            if self.trace:
                self.events.append(("main", f"backward {name}", self._last_ready, now))
            self._last_ready = now
            if not self._seen[i]:
                self._seen[i] = True
                self._pending[bucket] -= 1
                if self._pending[bucket] == 0:
                    self.order.grads_ready(bucket)  # before the host event: the helper then waits for it
                    self._ready[bucket].set()
        return hook

    def _install_forward_hooks(self) -> None:
        """Waits before a layer's forward for its parameters (reduce/sharded sync with overlap); trace spans."""
        waits = self.spec.kind in DEFERRED and self.config.overlap != "none" and self.size > 1
        bucket_of = {p: self.layout.bucket_of[i] for i, p in enumerate(self.layout.params)}
        for name, module in self.model.named_modules():
            own = [bucket_of[p] for p in module.parameters(recurse=False) if p in bucket_of]
            if waits and own:  # every bucket: helper threads deliver theirs independently
                self._handles.append(module.register_forward_pre_hook(self._forward_wait(sorted(set(own)))))
            if self.trace and not any(module.children()):
                starts: list[float] = []
                self._handles.append(module.register_forward_pre_hook(
                    lambda m, a, s=starts: s.append(time.perf_counter())))
                self._handles.append(module.register_forward_hook(
                    lambda m, a, o, s=starts, n=name: self.events.append(
                        ("main", f"forward {n}", s.pop(), time.perf_counter())) if s else None))

    def _forward_wait(self, buckets: list[int]):
        def pre_hook(module, args) -> None:
            for bucket in buckets:
                event = self._arrived[bucket]
                if not event.is_set():
                    start = time.perf_counter()
                    wait_event(event, self.comm, self.config.timeout_s, f"parameters of bucket {bucket}")
                    self._waited("wait params", start)
        return pre_hook

    # -- one step --------------------------------------------------------------------------------
    def step(self, inputs, targets) -> float:
        """One SGD step on this rank's batch; returns its loss."""
        inputs, targets = prepare_batch((inputs, targets), self.device, self.config.channels_last,
                                        non_blocking=True)
        start = self._last_ready = time.perf_counter()
        self._wait_s = 0.0
        self.events = []
        if self.comm is not None:
            self.comm.take_spans()
        propagate = self._stale and self.comm is not None
        if propagate:
            for e in self._arrived:
                e.clear()
            self._propagation = self.comm.submit_each(self._send_params_job, "parameter propagation")
            self._stale = False
        self._seen = [False] * len(self.layout.params)
        self._pending = [len(b.params) for b in self.layout.buckets]
        self.order.new_step()
        for e in self._ready:
            e.clear()
        job = None
        if self.comm is not None and self.config.overlap == "backward":
            job = self.comm.submit_each(self._reduce_job, "gradient aggregation")
        with autocast(self.device, self.config.precision):
            loss = self.loss_fn(self.model(inputs), targets)
        self._last_ready = time.perf_counter()
        (loss if self.scaler is None else loss.float() * self.scaler.scale).backward()
        for i, seen in enumerate(self._seen):  # parameters without a gradient this step
            if not seen:
                self.layout.grad_slice(i).zero_()
        self.order.all_grads_ready()
        for e in self._ready:
            e.set()
        if self.comm is not None:
            job = job or self.comm.submit_each(self._reduce_job, "gradient aggregation")
            begin = time.perf_counter()
            self.comm.wait_all(job, self.config.timeout_s)
            if self._propagation is not None:  # done by now: every layer's forward waited for it
                self.comm.wait_all(self._propagation, self.config.timeout_s)
                self._propagation = None
            self._waited("wait gradients", begin)
        skip = False
        if self.scaler is not None:
            skip = self._overflow()
            self.scaler.update(skip)
        self._update(skip)
        value = float(loss.detach())  # on a GPU: waits for the step's kernels, so the step is timed whole
        end = time.perf_counter()
        spans = self.comm.take_spans() if self.comm is not None else []
        self.events += [("comm", name, a, b) for name, a, b in spans]
        self.last_stats = {"iteration_s": end - start, "compute_s": end - start - self._wait_s,
                           "comm_s": _union_s(spans), "exposed_s": self._wait_s,
                           "bytes_sent": float(self.bytes_per_step)}
        if self.scaler is not None:
            self.last_stats["loss_scale"] = self.scaler.scale
            self.last_stats["skipped_steps"] = float(self.scaler.skipped)
        return value

    def _overflow(self) -> bool:
        """Whether any rank's gradients (the ranges it updates) hold inf or nan; the same on every rank."""
        ranges = [self.layout.flat_grads[bucket.start + a:bucket.start + b]
                  for sync, bucket in zip(self.syncs, self.layout.buckets) for a, b in sync.owned]
        flag = nonfinite_flag(ranges, self.device)
        if self.flag_group is not None:
            dist.all_reduce(flag, group=self.flag_group)  # nan on every rank if on any
        return bool(torch.isnan(flag).item())

    def _update(self, skip: bool = False) -> None:
        """SGD on this rank's ranges (none when `skip`: an fp16 step with inf/nan gradients), then the
        return of the parameters where the sync kind has one (also after a skipped step: every rank
        skips alike, and the collectives stay in step)."""
        kind, overlap = self.spec.kind, self.config.overlap
        unscale = 1.0 if self.scaler is None else 1.0 / self.scaler.scale
        for sync, bucket in zip(self.syncs, self.layout.buckets):
            for a, b in sync.owned if not skip else ():
                self.sgd.update(bucket.start + a, bucket.start + b, sync.grad_scale * unscale)
        self.order.updated()
        if self.comm is None:
            return
        if kind == "ps" or (kind in DEFERRED and overlap == "none"):
            begin = time.perf_counter()
            self.comm.wait_all(self.comm.submit_each(self._send_params_job, "parameter return"),
                               self.config.timeout_s)
            self._waited("wait params", begin)
        elif kind in DEFERRED:
            self._stale = True

    def _mine(self, thread: int) -> range:
        """The buckets helper thread `thread` communicates, in backward order."""
        return range(thread, len(self.syncs), len(self.comm))

    def _reduce_job(self, thread: int) -> Callable[[], None]:
        def job() -> None:
            started = []
            for i in self._mine(thread):
                wait_ready(self._ready[i], self.config.timeout_s, i)
                self.order.wait_grads(i)
                begin = time.perf_counter()
                started.append((i, begin, self.syncs[i].start_reduce()))
            for i, begin, work in started:
                self.syncs[i].finish_reduce(work)
                self.order.comm_done(i)
                self.comm.add_span(f"{self.spec.kind} bucket {i}", begin, time.perf_counter())
        return job

    def _send_params_job(self, thread: int) -> Callable[[], None]:
        # All at once, then waited in forward order (S-Caffe's Ibcast design): the first layers'
        # parameters (the last buckets) are needed first.
        def job() -> None:
            order = list(reversed(self._mine(thread)))
            self.order.wait_updated()
            started = [(i, time.perf_counter(), self.syncs[i].start_params()) for i in order]
            for i, begin, work in started:
                if work is not None:
                    work.wait()
                self.order.comm_done(i)
                self.comm.add_span(f"params bucket {i}", begin, time.perf_counter())
                self._arrived[i].set()
        return job

    def _waited(self, what: str, start: float) -> None:
        end = time.perf_counter()
        self._wait_s += end - start
        if self.trace:
            self.events.append(("main", what, start, end))

    def finish(self) -> None:
        """Deliver a pending parameter propagation (reduce/sharded sync with overlap), so all ranks agree."""
        if self._stale and self.comm is not None:
            for e in self._arrived:
                e.clear()
            self.comm.wait_all(self.comm.submit_each(self._send_params_job, "parameter propagation"),
                               self.config.timeout_s)
            self._stale = False

    def close(self) -> None:
        self.finish()
        for h in self._handles:
            h.remove()
        if self.comm is not None:
            self.comm.close()


def wait_ready(event: threading.Event, timeout_s: float, bucket: int) -> None:
    if not event.wait(timeout_s):
        raise TimeoutError(f"the gradients of bucket {bucket} were not ready within {timeout_s:g} s")


def _union_s(spans: list[tuple[str, float, float]]) -> float:
    """Seconds covered by at least one span (buckets in flight together count once)."""
    total, end = 0.0, float("-inf")
    for _, a, b in sorted(spans, key=lambda s: s[1]):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def _param_names(model: nn.Module) -> dict:
    return {p: name for name, p in model.named_parameters()}
