"""Pipeline schedules as Megatron-LM runs them, and their simulation: 1F1B and interleaved 1F1B.

Each pipeline stage runs its forward (F) and backward (B) passes of every micro-batch and model chunk in
the order of the schedule (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM", SC'21; the order of Megatron-Core's `forward_backward_pipelining_with_interleaving`):
a warm-up of forwards, a steady state alternating one forward and one backward, a cool-down of backwards.
A forward of chunk c on stage s waits for the same micro-batch's forward on the stage before (on the last
stage's previous chunk for s = 0), plus the activation's send; a backward waits for the stage after. The
bubble is whatever idle time these dependencies leave: it follows from the schedule, it is not a formula.

Try it: `python -c "from fabriclab.whatif.llm.schedule import simulate, order;
r = simulate(4, 1, 8, [[1.0]] * 4, [[2.0]] * 4, 0.0); print(max(r.stage_end_s))"` (the 1F1B closed form:
(m + p - 1)(f + b) = 33).
"""

from __future__ import annotations

from dataclasses import dataclass

F, B = 0, 1


def order(pp: int, vp: int, num_microbatches: int, stage: int) -> list[tuple[int, int, int]]:
    """(F or B, chunk, micro-batch) in the order stage `stage` runs them."""
    total = num_microbatches * vp
    if vp == 1:
        warmup = min(pp - stage - 1, num_microbatches)
    else:
        warmup = min((pp - stage - 1) * 2 + (vp - 1) * pp, total)

    def fwd(k: int) -> tuple[int, int, int]:
        if vp == 1:
            return F, 0, k
        return F, (k // pp) % vp, (k // (pp * vp)) * pp + k % pp

    def bwd(k: int) -> tuple[int, int, int]:
        if vp == 1:
            return B, 0, k
        return B, vp - 1 - (k // pp) % vp, (k // (pp * vp)) * pp + k % pp

    ops = [fwd(k) for k in range(warmup)]
    for i in range(total - warmup):
        ops += [fwd(warmup + i), bwd(i)]
    ops += [bwd(k) for k in range(total - warmup, total)]
    return ops


@dataclass
class PipelineRun:
    """When each stage ran each of its passes."""

    ops: list[list[tuple[int, int, int]]]
    """Per stage: (F or B, chunk, micro-batch) in order."""
    start_s: list[list[float]]
    end_s: list[list[float]]
    stage_end_s: list[float]
    busy_s: list[float]
    """Per stage: the sum of its passes' durations."""


def simulate(pp: int, vp: int, num_microbatches: int, forward_s: list[list[float]], backward_s: list[list[float]],
             p2p_s: float, *, ready_s=None) -> PipelineRun:
    """Run the schedule: `forward_s[stage][chunk]`, `backward_s[stage][chunk]` seconds per pass, `p2p_s` per
    activation (or gradient) sent to the next stage. `ready_s(stage, chunk, kind, micro_batch, start, end)`,
    when given, may push a pass's end later (a parameter gather that must finish first) and returns it."""
    ops = [order(pp, vp, num_microbatches, s) for s in range(pp)]
    done: dict[tuple[int, int, int, int], float] = {}  # (kind, stage, chunk, micro-batch) -> end
    start = [[0.0] * len(o) for o in ops]
    end = [[0.0] * len(o) for o in ops]
    nxt, free = [0] * pp, [0.0] * pp
    remaining = sum(len(o) for o in ops)
    while remaining:
        progressed = False
        for s in range(pp):
            while nxt[s] < len(ops[s]):
                kind, c, m = ops[s][nxt[s]]
                dep = _dependency(pp, vp, kind, s, c, m)
                if dep is not None and dep not in done:
                    break
                t0 = free[s] if dep is None else max(free[s], done[dep] + (p2p_s if dep[1] != s else 0.0))
                dur = forward_s[s][c] if kind == F else backward_s[s][c]
                t1 = t0 + dur
                if ready_s is not None:
                    t1 = ready_s(s, c, kind, m, t0, t1)
                start[s][nxt[s]], end[s][nxt[s]] = t0, t1
                done[(kind, s, c, m)] = t1
                free[s] = t1
                nxt[s] += 1
                remaining -= 1
                progressed = True
        assert progressed, "pipeline schedule deadlocked (an ordering bug)"
    busy = [sum(forward_s[s][c] if k == F else backward_s[s][c] for k, c, _ in ops[s]) for s in range(pp)]
    return PipelineRun(ops=ops, start_s=start, end_s=end, stage_end_s=free, busy_s=busy)


def _dependency(pp: int, vp: int, kind: int, s: int, c: int, m: int) -> tuple[int, int, int, int] | None:
    if kind == F:
        if s > 0:
            return F, s - 1, c, m
        return (F, pp - 1, c - 1, m) if c > 0 else None
    if s < pp - 1:
        return B, s + 1, c, m
    return (B, 0, c + 1, m) if c < vp - 1 else (F, s, c, m)
