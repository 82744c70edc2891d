"""Where every rank's steps end, for the level engine (`levels.py`): sparse, and fast for lock-step rounds.

The level engine needs, for each transfer, the end of the step before it on its sender and its receiver.
`StepEnds` keeps per rank only the last step it recorded and the one before it (a rank's steps arrive in
order), and a lock-step round (every rank sends once and receives once, all at the same step) is
recorded with a few vectorized operations and no per-rank step bookkeeping.

Try it: `fabriclab bench sim --cases ring-16384`.
"""

from __future__ import annotations

import numpy as np


class StepEnds:
    """End time of every (rank, step), stored sparsely: transfers end, then the step's reductions."""

    def __init__(self, num_ranks: int) -> None:
        self.num_ranks = num_ranks
        self.last_step = np.full(num_ranks, -1, dtype=np.int64)
        self.last_end = np.zeros(num_ranks)
        self.prev_end = np.zeros(num_ranks)
        self.reduce_s = np.zeros(num_ranks)
        self.no_reduce = True
        """Whether `reduce_s` is all zeros (then it is not added)."""
        self.uniform = -1
        """The step every rank has last recorded, when it is the same for all (else None)."""

    def lockstep_step(self, lv, batch) -> int | None:
        """The level's step if it is a lock-step round after a lock-step past (see `record_lockstep`)."""
        if self.uniform is None or not batch.permutation:
            return None
        step = int(lv.src_step[0])
        if step != self.uniform + 1 or not lv.src_step.min() == lv.src_step.max() == step:
            return None
        if lv.dst_step is not lv.src_step and not lv.dst_step.min() == lv.dst_step.max() == step:
            return None
        return step

    def uniform_end(self, step: int) -> np.ndarray:
        """End of every rank's step `step - 1` (all ranks are there); do not modify it."""
        if not step:
            return np.zeros(self.num_ranks)
        return self.last_end if self.no_reduce else self.last_end + self.reduce_s

    def record_lockstep(self, step: int, finish: np.ndarray, batch, reduce_s, before: np.ndarray) -> None:
        """Add a level in which every rank sends once and receives once, all at step `step`; `before`
        is `uniform_end(step)`."""
        self.prev_end = before  # the old `last_end`: replaced below, never changed in place
        self.last_end = np.maximum(finish[batch.send_of], finish[batch.recv_of])
        if np.ndim(reduce_s):
            self.reduce_s, self.no_reduce = reduce_s[batch.recv_of], False
        elif not self.no_reduce:
            self.reduce_s, self.no_reduce = np.zeros(self.num_ranks), True
        self.last_step.fill(step)
        self.uniform = step

    def before(self, ranks: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """End of step k-1 of each (rank, k); a rank's steps arrive in order, so one back suffices."""
        current = self.last_step[ranks] == steps
        done = self.last_end[ranks] + self.reduce_s[ranks]
        return np.where(steps == 0, 0.0, np.where(current, self.prev_end[ranks], done))

    def record(self, lv, finish: np.ndarray, reduce_s, unique_ends: bool) -> None:
        """Add one level's transfers; within a level all entries of a rank belong to one step."""
        self.uniform = None
        self.no_reduce = False
        fmax = np.full(self.num_ranks, -np.inf)
        if unique_ends:
            fmax[lv.src] = finish
            fmax[lv.dst] = np.maximum(fmax[lv.dst], finish)
        else:
            np.maximum.at(fmax, lv.src, finish)
            np.maximum.at(fmax, lv.dst, finish)
        if np.ndim(reduce_s):
            rsum = np.bincount(lv.dst, weights=reduce_s, minlength=self.num_ranks)
        else:
            rsum = np.zeros(self.num_ranks)
        step = np.full(self.num_ranks, -1, dtype=np.int64)
        step[lv.src] = lv.src_step
        step[lv.dst] = lv.dst_step
        seen = step >= 0
        new = seen & (step != self.last_step)
        old = seen & ~new
        self.prev_end[new] = self.last_end[new] + self.reduce_s[new]
        self.last_step[new] = step[new]
        self.last_end[new] = fmax[new]
        self.reduce_s[new] = rsum[new]
        self.last_end[old] = np.maximum(self.last_end[old], fmax[old])
        self.reduce_s[old] += rsum[old]

    def rank_finish(self) -> np.ndarray:
        return np.where(self.last_step >= 0, self.last_end + self.reduce_s, 0.0)

    def shift(self, rounds: int, by_s: float) -> None:
        """Skip `rounds` more lock-step rounds of the last one's kind, each ending `by_s` after the one
        before at every rank (a steady state: see `levels.py`)."""
        self.prev_end = self.prev_end + rounds * by_s
        self.last_end = self.last_end + rounds * by_s
        self.uniform += rounds
        self.last_step.fill(self.uniform)
