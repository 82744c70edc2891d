"""Run a collective `Schedule` for real on one rank, over torch.distributed point-to-point operations.

One driver serves every algorithm: it walks this rank's steps of a `Schedule` on a flat, contiguous 1-D
tensor and keeps the schedule's semantics exactly (see `fabriclab.collectives.schedule`): sends carry a
chunk's value as it was at the start of their step, receives land in temporaries and are applied in op
order when their step ends (`recv_reduce` combines with sum/max/min, `recv_copy` overwrites).

Two ways to walk it, both with the same result bit for bit:

* `step` mode posts each step as one `dist.batch_isend_irecv` group, waits for all of it, then applies
  the receives. It needs nothing of the backend beyond grouped P2P, so it is what CUDA tensors (NCCL) get.
* `pipelined` mode (CPU tensors, Gloo) splits every chunk into segments of `segment_bytes` and posts a
  segment as soon as the data it depends on has arrived, across step boundaries: a ring then streams like
  Gloo's own segmented allreduce instead of stalling at every step. Hazards are worked out once per
  schedule (read-after-write for sends, write-after-read and write order for receives) by
  `fabriclab.collectives.matching.compile_plan`, torch-free and shared with the executor's simulated twin
  (`fabriclab.bench.validate.executor`), so the pipelining is a transport detail invisible in the
  result. All ranks must use the same `segment_bytes`, because message matching is FIFO per pair of
  ranks and both ends must cut a chunk into the same messages.

On CUDA tensors over NCCL (`auto` picks `step` there) every step is one NCCL group of sends and
receives, and the reductions are kernels on the GPU: nothing goes through the host. Backends that
cannot send CUDA tensors point to point (Gloo takes host memory only; several ranks sharing one GPU
run this way) get the buffer staged: copied to a host buffer, walked there as on CPU, copied back.

Temporaries come from a `BufferPool` on the tensor's device and dtype and are reused across steps and
calls; the hot path allocates nothing. `run_native` runs the backend's own collective for comparison
(Gloo's CUDA all_reduce and broadcast stage through host memory inside Gloo; its other collectives
get the buffer staged here).

Try it: `fabriclab collectives bench --algo ring,native --np 4 --sizes 1KB:64MB`.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from fabriclab.collectives.matching import DEFAULT_SEGMENT_BYTES, RankPlan, Segment, compile_plan
from fabriclab.collectives.schedule import (ALLREDUCE, BROADCAST, COLLECTIVES, REDUCE, REDUCE_SCATTER,
                                            Schedule, split_counts)
from fabriclab.runtime.devices import device_backend, device_p2p

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "int32": torch.int32, "int64": torch.int64}
REDOPS = ("sum", "max", "min")
MODES = ("auto", "step", "pipelined")

_NATIVE_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
# Collectives Gloo runs on CUDA tensors itself (through pinned host buffers, torch's ProcessGroupGloo);
# the others are staged through host memory here.
_GLOO_CUDA_NATIVE = (ALLREDUCE, BROADCAST)


class BufferPool:
    """Flat temporaries per (device, dtype), grown on demand and reused by every run that shares it."""

    def __init__(self) -> None:
        self._buffers: dict[tuple[torch.device, torch.dtype, str], torch.Tensor] = {}

    def get(self, numel: int, dtype: torch.dtype, device: torch.device, *, slot: str = "temp") -> torch.Tensor:
        """`numel` elements; `slot` names buffers that are in use together (temporaries vs. staging)."""
        key = (torch.device(device), dtype, slot)
        buf = self._buffers.get(key)
        if buf is None or buf.numel() < numel:
            # Host staging buffers of CUDA tensors are pinned: copies to and from them run at full speed.
            pin = slot == "stage" and key[0].type == "cpu" and torch.cuda.is_available()
            buf = torch.empty(max(numel, 1), dtype=dtype, device=device, pin_memory=pin)
            self._buffers[key] = buf
        return buf[:numel]


class ScheduleExecutor:
    """Runs one `Schedule` on this rank of `group`, reusing its compiled plan and temporaries.

    `run(tensor)` works in place on a contiguous 1-D tensor of `schedule.count` elements and returns it."""

    def __init__(self, schedule: Schedule, *, group: dist.ProcessGroup | None = None, redop: str = "sum",
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES, mode: str = "auto",
                 pool: BufferPool | None = None) -> None:
        if redop not in REDOPS:
            raise ValueError(f"unknown reduce op {redop!r}: use one of {', '.join(REDOPS)}")
        if mode not in MODES:
            raise ValueError(f"unknown executor mode {mode!r}: use one of {', '.join(MODES)}")
        if segment_bytes < 1:
            raise ValueError(f"segment size must be at least 1 byte, got {segment_bytes}")
        size = dist.get_world_size(group)
        if schedule.num_ranks != size:
            raise ValueError(f"the schedule is for {schedule.num_ranks} ranks but the process group has "
                             f"{size}: build it with num_ranks={size}")
        self.schedule, self.group, self.redop, self.mode = schedule, group, redop, mode
        self.segment_bytes = segment_bytes
        self.rank = dist.get_rank(group)
        self.pool = pool if pool is not None else BufferPool()
        self._plans: dict[int, RankPlan] = {}
        self._direct: dict[str, bool] = {}

    def plan(self, itemsize: int, pipelined: bool) -> RankPlan:
        """The compiled plan for one element size (segments are cut in bytes, messages in elements)."""
        seg = max(1, self.segment_bytes // itemsize) if pipelined else max(self.schedule.count, 1)
        plan = self._plans.get(seg)
        if plan is None:
            plan = self._plans[seg] = compile_plan(self.schedule, self.rank, seg)
        return plan

    def run(self, tensor: torch.Tensor) -> torch.Tensor:
        _check_tensor(tensor, self.schedule.count)
        if not self._in_place(tensor.device):
            return _staged(tensor, self.pool, self._walk)
        return self._walk(tensor)

    def _in_place(self, device: torch.device) -> bool:
        """Whether the backend moves tensors of `device` itself (cached per device type)."""
        if device.type not in self._direct:
            self._direct[device.type] = device_p2p(self.group, device)
            if device.type != "cpu" and self._direct[device.type] and self.mode == "pipelined":
                raise ValueError("pipelined mode posts one message per segment and waits for each alone, which "
                                 "NCCL's grouped point-to-point calls do not offer: use mode step or auto")
        return self._direct[device.type]

    def _walk(self, tensor: torch.Tensor) -> torch.Tensor:
        pipelined = self.mode == "pipelined" or (self.mode == "auto" and tensor.device.type == "cpu")
        plan = self.plan(tensor.element_size(), pipelined)
        temp = self.pool.get(plan.temp_elements, tensor.dtype, tensor.device)
        combine = _COMBINE[self.redop]
        if pipelined:
            _run_pipelined(plan, tensor, temp, self.group, combine)
        else:
            _run_steps(plan, tensor, temp, self.group, combine)
        return tensor


def run_schedule(schedule: Schedule, tensor: torch.Tensor, *, group: dist.ProcessGroup | None = None,
                 redop: str = "sum", **options) -> torch.Tensor:
    """One-shot `ScheduleExecutor(schedule, ...).run(tensor)`; keep an executor to reuse its plan."""
    return ScheduleExecutor(schedule, group=group, redop=redop, **options).run(tensor)


def _check_tensor(tensor: torch.Tensor, count: int) -> None:
    if tensor.dim() != 1 or not tensor.is_contiguous():
        raise ValueError(f"the buffer must be a contiguous 1-D tensor, got shape {tuple(tensor.shape)}: "
                         f"pass tensor.flatten()")
    if tensor.numel() != count:
        raise ValueError(f"the buffer has {tensor.numel()} elements but the schedule was built for {count}")
    if tensor.dtype not in DTYPES.values():
        raise ValueError(f"unsupported dtype {tensor.dtype}: use one of {', '.join(DTYPES)}")


def _sum(dst: torch.Tensor, src: torch.Tensor) -> None:
    dst.add_(src)


def _max(dst: torch.Tensor, src: torch.Tensor) -> None:
    torch.maximum(dst, src, out=dst)


def _min(dst: torch.Tensor, src: torch.Tensor) -> None:
    torch.minimum(dst, src, out=dst)


_COMBINE = {"sum": _sum, "max": _max, "min": _min}


def _p2p(seg: Segment, tensor: torch.Tensor, temp: torch.Tensor, group) -> dist.P2POp:
    if seg.is_send:
        return dist.P2POp(dist.isend, tensor[seg.start:seg.stop], group=group, group_peer=seg.peer)
    buf = tensor[seg.start:seg.stop] if seg.tmp < 0 else temp[seg.tmp:seg.tmp + seg.stop - seg.start]
    return dist.P2POp(dist.irecv, buf, group=group, group_peer=seg.peer)


def _apply(seg: Segment, tensor: torch.Tensor, temp: torch.Tensor, combine) -> None:
    if seg.tmp < 0:
        return
    dst, src = tensor[seg.start:seg.stop], temp[seg.tmp:seg.tmp + seg.stop - seg.start]
    if seg.reduce:
        combine(dst, src)
    else:
        dst.copy_(src)


def _run_steps(plan: RankPlan, tensor, temp, group, combine) -> None:
    segs, bounds = plan.segments, plan.step_starts
    for k in range(len(bounds) - 1):
        step = range(bounds[k], bounds[k + 1])
        if not step:  # nothing of this rank's in the step (a chunk of 0 elements)
            continue
        # One grouped call per step: NCCL needs the sends and receives of a step in one group. On CUDA,
        # wait() makes the current stream wait for NCCL's; the host goes on queueing the next step.
        for work in dist.batch_isend_irecv([_p2p(segs[i], tensor, temp, group) for i in step]):
            work.wait()
        for i in step:
            if not segs[i].is_send:
                _apply(segs[i], tensor, temp, combine)


def _run_pipelined(plan: RankPlan, tensor, temp, group, combine) -> None:
    segs = plan.segments
    works: list = [None] * len(segs)
    waited = [False] * len(segs)  # a Gloo work must be waited exactly once: a second wait hangs
    batch: list[int] = []
    applied = 0

    def flush() -> None:
        if batch:
            posted = dist.batch_isend_irecv([_p2p(segs[i], tensor, temp, group) for i in batch])
            assert len(posted) == len(batch), "pipelined mode needs one work per P2P op (use mode='step')"
            for i, work in zip(batch, posted):
                works[i] = work
            batch.clear()

    def wait(i: int) -> None:
        if not waited[i]:
            if works[i] is None:
                flush()
            works[i].wait()
            waited[i] = True

    def apply_until(n: int) -> None:
        nonlocal applied
        flush()
        for a in range(applied, n):
            i = plan.applies[a]
            seg = segs[i]
            if seg.tmp >= 0:
                for s in seg.war:
                    wait(s)
            wait(i)
            _apply(seg, tensor, temp, combine)
        applied = max(applied, n)

    for i, seg in enumerate(segs):
        if seg.need > applied:
            apply_until(seg.need)
        if seg.tmp < 0 and not seg.is_send:
            for s in seg.war:
                wait(s)
        batch.append(i)
    apply_until(len(plan.applies))
    for i, seg in enumerate(segs):
        if seg.is_send:
            wait(i)


def run_native(collective: str, tensor: torch.Tensor, *, group: dist.ProcessGroup | None = None,
               redop: str = "sum", root: int = 0, pool: BufferPool | None = None) -> torch.Tensor:
    """The backend's own collective on the same flat buffer and with the same end state as a schedule.

    reduce_scatter and allgather use the block layout of `split_counts` (block r belongs to rank r); when
    the count does not split evenly the blocks go through a padded temporary (copies included)."""
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}: use one of {', '.join(COLLECTIVES)}")
    if redop not in REDOPS:
        raise ValueError(f"unknown reduce op {redop!r}: use one of {', '.join(REDOPS)}")
    _check_tensor(tensor, tensor.numel())
    op, size = _NATIVE_OPS[redop], dist.get_world_size(group)
    if collective in (REDUCE, BROADCAST) and not 0 <= root < size:
        raise ValueError(f"root {root} is out of range for {size} ranks: use 0..{size - 1}")
    pool = pool or BufferPool()
    if tensor.device.type != "cpu" and not _native_on_device(collective, group, tensor.device):
        return _staged(tensor, pool, lambda host: run_native(collective, host, group=group, redop=redop,
                                                             root=root, pool=pool))
    try:
        if collective == ALLREDUCE:
            dist.all_reduce(tensor, op=op, group=group)
        elif collective == REDUCE:
            dist.reduce(tensor, op=op, group=group, group_dst=root)
        elif collective == BROADCAST:
            dist.broadcast(tensor, group=group, group_src=root)
        else:
            _native_blocks(collective, tensor, op, group, pool)
    except (RuntimeError, NotImplementedError) as exc:
        if "support" in str(exc).lower():
            backend = dist.get_backend(group)
            raise ValueError(f"the {backend} backend has no native {collective} ({exc}): "
                             f"benchmark a schedule instead, e.g. --algo ring") from None
        raise
    return tensor


def _native_blocks(collective, tensor, op, group, pool: BufferPool) -> None:
    size, rank = dist.get_world_size(group), dist.get_rank(group)
    counts = split_counts(tensor.numel(), size)
    block, even = counts[0], len(set(counts)) == 1
    offset = sum(counts[:rank])
    mine = tensor[offset:offset + counts[rank]]
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    if even:
        if collective == REDUCE_SCATTER:
            scatter(mine, tensor, op=op, group=group)
        else:
            gather(tensor, mine, group=group)
        return
    padded = pool.get(block * size + block, tensor.dtype, tensor.device)
    full, out = padded[:block * size], padded[block * size:]
    if collective == REDUCE_SCATTER:
        full.zero_()  # padding lanes are never read back; zero keeps max/min/sum well defined
        _scatter_blocks(tensor, full, counts, block, to_padded=True)
        scatter(out, full, op=op, group=group)
        mine.copy_(out[:counts[rank]])
    else:
        out[:counts[rank]].copy_(mine)
        gather(full, out, group=group)
        _scatter_blocks(tensor, full, counts, block, to_padded=False)


def _scatter_blocks(flat, padded, counts, block, *, to_padded: bool) -> None:
    offset = 0
    for r, n in enumerate(counts):
        src, dst = flat[offset:offset + n], padded[r * block:r * block + n]
        if to_padded:
            dst.copy_(src)
        else:
            src.copy_(dst)
        offset += n


def _native_on_device(collective: str, group, device: torch.device) -> bool:
    """Whether the backend runs `collective` on tensors of `device` itself (NCCL: all; Gloo on CUDA:
    all_reduce and broadcast; anything else is staged through host memory)."""
    backend = device_backend(group, device)
    return backend == "nccl" or (backend == "gloo" and collective in _GLOO_CUDA_NATIVE)


def _staged(tensor: torch.Tensor, pool: BufferPool, run) -> torch.Tensor:
    """`run` on a host copy of `tensor`, copied back: for backends that cannot move device tensors."""
    host = pool.get(tensor.numel(), tensor.dtype, torch.device("cpu"), slot="stage")
    host.copy_(tensor)  # device to host: waits for the kernels that wrote `tensor`
    run(host)
    tensor.copy_(host)
    return tensor
