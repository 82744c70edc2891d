"""The schedule executor on real Gloo process groups: results against a locally computed reference.

One local spawn per rank count runs every case inside it (spawning is the slow part). Inputs: integers
0..3 for integer dtypes (results must be exact) and uniform floats in [-1, 1) for float dtypes. Float
tolerance: a sum of P terms in [-1, 1) rounds at most P-1 times, each time by at most eps/2 x |partial|
<= eps/2 x P, so |result - float64 reference| <= P^2 eps / 2; we allow P^2 eps (eps of the dtype). max, min
and copies are exact in every dtype. The pipelined mode (small segments, so chunks are cut into many
messages) must also agree bit for bit with the step-by-step mode, since both apply receives in op order.
"""

from __future__ import annotations

import pytest
import torch

from fabriclab.collectives import registry
from fabriclab.collectives.schedule import Builder, split_counts, split_range
from fabriclab.runtime.executor import DTYPES, ScheduleExecutor, run_native
from fabriclab.runtime.launch import LaunchConfig, spawn

COUNTS = (0, 1, 7, 1001)
# Schedules per collective besides the hand-built ring; these are cheap enough at 8 ranks.
ALGOS = {
    "allreduce": ("ring", "butterfly", "chain:chunks=3", "hierarchical:lower=chain:upper=binomial:group=2"),
    "reduce": ("ring", "binomial:chunks=3", "butterfly"),
    "broadcast": ("ring", "binomial:chunks=3", "chain:chunks=3"),
    "reduce_scatter": ("ring", "recursive"),
    "allgather": ("ring", "recursive"),
}
SEGMENT_BYTES = 28  # 7 float32, 3 int64 elements: every larger chunk becomes several messages


def hand_ring_allreduce(num_ranks: int, count: int):
    """Ring allreduce built with `Builder` directly, independent of the registry."""
    b = Builder(num_ranks, count)
    blocks = split_range(0, count, num_ranks)
    for phase in ("reduce", "copy"):
        for s in range(num_ranks - 1):
            for r in range(num_ranks):
                shift = s + 1 if phase == "reduce" else s
                step = b.step(r).send((r + 1) % num_ranks, blocks[(r - shift) % num_ranks])
                recv = step.recv_reduce if phase == "reduce" else step.recv_copy
                recv((r - 1) % num_ranks, blocks[(r - shift - 1) % num_ranks])
    return b.build("allreduce", "hand-ring")


def inputs(num_ranks: int, count: int, dtype: torch.dtype, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return [(torch.rand(count, generator=g, dtype=torch.float64) * 2 - 1).to(dtype) for _ in range(num_ranks)]
    return [torch.randint(0, 4, (count,), generator=g).to(dtype) for _ in range(num_ranks)]


def reference(collective: str, xs: list[torch.Tensor], redop: str, root: int, rank: int):
    """(expected buffer, the slice of it the collective defines on `rank`)."""
    n, count = len(xs), xs[0].numel()
    wide = torch.stack([x.to(torch.float64) for x in xs])
    reduced = {"sum": wide.sum(0), "max": wide.amax(0), "min": wide.amin(0)}[redop]
    counts = split_counts(count, n)
    lo = sum(counts[:rank])
    if collective == "allreduce":
        return reduced, slice(0, count)
    if collective == "reduce":
        return reduced, slice(0, count if rank == root else 0)
    if collective == "broadcast":
        return wide[root], slice(0, count)
    if collective == "reduce_scatter":
        return reduced, slice(lo, lo + counts[rank])
    offsets = [sum(counts[:r]) for r in range(n)]
    return torch.cat([wide[r, offsets[r]:offsets[r] + counts[r]] for r in range(n)]), slice(0, count)


def compare(got: torch.Tensor, want: torch.Tensor, redop: str, num_ranks: int) -> bool:
    if not got.dtype.is_floating_point or redop != "sum":
        return torch.equal(got.to(torch.float64), want)
    tol = num_ranks * num_ranks * torch.finfo(got.dtype).eps
    return bool(((got.to(torch.float64) - want).abs() <= tol).all())


def check_rank(ctx) -> list[str]:
    """Every case on this rank; returns a description of each mismatch."""
    n, rank, bad = ctx.world_size, ctx.rank, []
    seed = 0

    def case(label, collective, run, dtype, redop, count, root=0, same_as=None) -> None:
        nonlocal seed
        seed += 1
        xs = inputs(n, count, dtype, seed)
        out = run(xs[rank].clone())
        want, part = reference(collective, xs, redop, root, rank)
        if not compare(out[part], want[part], redop, n):
            bad.append(f"rank {rank}: {label} {collective} {dtype} {redop} count={count} root={root}")
        if same_as is not None and not torch.equal(same_as(xs[rank].clone()), out):
            bad.append(f"rank {rank}: pipelined and step modes differ ({label} {redop} count={count})")

    # Every dtype and reduce op on the hand-built ring, cut into 3-element messages, and bit-identical
    # between the pipelined and the step-by-step walk.
    for count in COUNTS + (max(n - 1, 0),):
        schedule = hand_ring_allreduce(n, count)
        for redop in ("sum", "max", "min"):
            piped = ScheduleExecutor(schedule, redop=redop, segment_bytes=SEGMENT_BYTES, mode="pipelined")
            stepped = ScheduleExecutor(schedule, redop=redop, mode="step")
            for name, dtype in DTYPES.items():
                case(f"hand ring {name}", "allreduce", piped.run, dtype, redop, count, same_as=stepped.run)
    # Registry schedules of every collective, both walks, a root that is not 0.
    for collective, algos in ALGOS.items():
        root = n - 1 if collective in ("reduce", "broadcast") else 0
        for algo in algos:
            for count in COUNTS + (max(n - 1, 0),):
                schedule = registry.build_schedule(collective, algo, n, count, root)
                for mode, dtype, redop in (("pipelined", torch.float32, "sum"), ("step", torch.int32, "min")):
                    ex = ScheduleExecutor(schedule, redop=redop, segment_bytes=SEGMENT_BYTES, mode=mode)
                    case(f"{algo} {mode}", collective, ex.run, dtype, redop, count, root)
    # The backend's own collectives, including uneven reduce_scatter/allgather blocks.
    for collective in ALGOS:
        root = n - 1 if collective in ("reduce", "broadcast") else 0
        for count in (0, 7, 1001, 4 * n):
            for dtype, redop in ((torch.float32, "sum"), (torch.int64, "max"), (torch.bfloat16, "min")):
                case("native", collective, lambda t, c=collective, r=redop, o=root:
                     run_native(c, t, redop=r, root=o), dtype, redop, count, root)
    return bad


@pytest.mark.parametrize("num_ranks", [1, 2, 3, 4, 5, pytest.param(8, marks=pytest.mark.slow(
    "4 ranks (a power of two, two groups of 2) and 3 and 5 run every case"))])
def test_executor_matches_reference(num_ranks):
    results = spawn(check_rank, config=LaunchConfig(num_ranks=num_ranks, timeout_s=60))
    mismatches = [m for rank in sorted(results) for m in results[rank]]
    assert not mismatches, "\n".join(mismatches[:20])


def bad_inputs(ctx) -> list[str]:
    schedule = hand_ring_allreduce(ctx.world_size, 10)
    messages = []
    for call in (lambda: ScheduleExecutor(schedule).run(torch.zeros(11)),
                 lambda: ScheduleExecutor(schedule).run(torch.zeros(2, 5)),
                 lambda: ScheduleExecutor(schedule, redop="prod"),
                 lambda: ScheduleExecutor(hand_ring_allreduce(ctx.world_size + 1, 10)),
                 lambda: run_native("alltoall", torch.zeros(3))):
        try:
            call()
            messages.append("no error")
        except ValueError as exc:
            messages.append(str(exc))
    return messages


def test_bad_input_is_a_value_error_that_says_what_to_change():
    messages = spawn(bad_inputs, config=LaunchConfig(num_ranks=2, timeout_s=30))[0]
    assert "11 elements" in messages[0] and "10" in messages[0]
    assert "contiguous 1-D" in messages[1]
    assert "prod" in messages[2] and "sum" in messages[2]
    assert "3 ranks" in messages[3] and "num_ranks=2" in messages[3]
    assert "alltoall" in messages[4]


def staged_rank(ctx) -> list[str]:
    """Every collective with staging forced (what CUDA tensors over Gloo get): the buffer goes through a
    host copy; the result must equal the direct walk's bit for bit."""
    import fabriclab.runtime.executor as executor

    bad, seed = [], 100
    for collective, algos in ALGOS.items():
        root = ctx.world_size - 1 if collective in ("reduce", "broadcast") else 0
        for algo in algos[:2]:
            for count in (0, 7, 1001):
                seed += 1
                schedule = registry.build_schedule(collective, algo, ctx.world_size, count, root)
                x = inputs(ctx.world_size, count, torch.float32, seed)[ctx.rank]
                direct = ScheduleExecutor(schedule, segment_bytes=SEGMENT_BYTES).run(x.clone())
                staged = ScheduleExecutor(schedule, segment_bytes=SEGMENT_BYTES)
                staged._direct["cpu"] = False  # as device_p2p answers for CUDA tensors over Gloo
                got = staged.run(x.clone())
                if not torch.equal(got, direct):
                    bad.append(f"rank {ctx.rank}: staged {algo} {collective} count={count} differs")
    assert executor.device_p2p(ctx.group, "cpu") and not executor.device_p2p(ctx.group, "cuda")
    return bad


def test_staged_walk_equals_the_direct_one():
    results = spawn(staged_rank, config=LaunchConfig(num_ranks=3, timeout_s=60))
    mismatches = [m for rank in sorted(results) for m in results[rank]]
    assert not mismatches, "\n".join(mismatches[:20])
