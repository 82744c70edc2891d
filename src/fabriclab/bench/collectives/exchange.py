"""The exchanges no schedule implements, timed as the backend's own call: all-to-all and send/receive.

* **alltoall** (nccl-tests' `alltoall_perf`): `torch.distributed.all_to_all_single(out, in)`, out of place.
  Rank r's input holds n blocks; block j goes to rank j and lands there as block r. As in nccl-tests the
  count is rounded down to whole blocks (n x count // n elements), and the row reports that size.
  busbw = algbw x (n-1)/n: every rank sends (n-1)/n of its buffer over the network.
* **sendrecv** (nccl-tests' `sendrecv_perf`): every rank sends its whole buffer to rank+1 and receives
  rank-1's (`batch_isend_irecv`), out of place; busbw = algbw.

Inputs are the benchmark's periodic small integers (`bench.collectives.run`), each rank's sequence also
shifted by 31 x rank elements: a block from the wrong rank or from the wrong offset does not match by
accident. The output buffer is filled with the sentinel before every timed run (outside timing), so a
block the exchange never wrote counts as wrong.

Try it: `fabriclab collectives bench --op alltoall --algo native --np 4 --sizes 1KB:16MB`.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist

from fabriclab.collectives.schedule import ALLTOALL, SENDRECV

# Elements each rank's input sequence is shifted by per rank (coprime with the benchmark's period 4099).
RANK_SHIFT = 31


def exchange_count(op: str, count: int, num_ranks: int) -> int:
    """Elements the exchange moves for a buffer of `count`: alltoall rounds down to whole blocks per rank."""
    return count // num_ranks * num_ranks if op == ALLTOALL else count


class NativeExchange:
    """One exchange with its own output buffer: `reset()` fills it with `sentinel`; calling it runs the
    exchange on the input and returns the output."""

    def __init__(self, op: str, count: int, dtype: torch.dtype, *, group, device: torch.device, sentinel: int):
        self.op, self.group, self.sentinel = op, group, sentinel
        self.out = torch.full((count,), sentinel, dtype=dtype, device=device)
        self.size, self.rank = dist.get_world_size(group), dist.get_rank(group)

    def reset(self) -> None:
        self.out.fill_(self.sentinel)

    def __call__(self, buf: torch.Tensor) -> torch.Tensor:
        if self.op == ALLTOALL:
            dist.all_to_all_single(self.out, buf, group=self.group)
        elif self.size == 1:
            self.out.copy_(buf)
        else:
            nxt, prev = (self.rank + 1) % self.size, (self.rank - 1) % self.size
            ops = [dist.P2POp(dist.irecv, self.out, group=self.group, group_peer=prev),
                   dist.P2POp(dist.isend, buf, group=self.group, group_peer=nxt)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()
        return self.out


def exchange_inputs(op: str, count: int, num_ranks: int, rank: int,
                    tile: Callable[[torch.Tensor, int, int], torch.Tensor],
                    values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(this rank's input, the output it must receive). `tile(period, start, length)` cuts the periodic
    sequence `period`; `values[r]` is rank r's period."""

    def sequence(source: int, start: int, length: int) -> torch.Tensor:
        return tile(values[source], RANK_SHIFT * source + start, length)

    init = sequence(rank, 0, count)
    if op == SENDRECV:
        prev = (rank - 1) % num_ranks
        return init, sequence(prev, 0, count)
    block = count // num_ranks
    # Block s of the output is block `rank` of rank s's input.
    expected = torch.cat([sequence(s, rank * block, block) for s in range(num_ranks)]) if block else init[:0]
    return init, expected


def reference_exchange(op: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """What every rank receives, computed in one process (the test oracle of `exchange_inputs`)."""
    n = len(inputs)
    if op == SENDRECV:
        return [inputs[(r - 1) % n].clone() for r in range(n)]
    block = inputs[0].numel() // n
    return [torch.cat([inputs[s][r * block:(r + 1) * block] for s in range(n)]) for r in range(n)]
