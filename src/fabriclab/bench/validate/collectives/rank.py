"""One rank of `fabriclab validate collectives`: the backend's own collectives, op after op, nccl-tests style.

`fabriclab validate collectives` starts this module on every emulated host (`run_in_cluster`, one rank per
host namespace, the torchrun-style environment), so `launch` joins that launch. For every op of the plan
it runs the collectives benchmark (`bench_rank`, algorithm `native`: Gloo's all_gather, all_to_all_single,
...) over every size: warm-up, timed iterations each after a barrier, the slowest rank's time per
iteration, a correctness check on every iteration. Rank 0 writes the rows as JSON to `--out`.

Try it: `fabriclab emu run -- python -m fabriclab.bench.validate.collectives.rank --config plan.json --out
rows.json` (after `fabriclab emu up ...`; `fabriclab validate collectives` writes the plan and does all of this).
"""

from __future__ import annotations

import sys

from fabriclab.bench.collectives.run import NATIVE, BenchConfig, bench_rank
from fabriclab.bench.validate.rank import rank_main
from fabriclab.runtime.launch import RankContext


def check_rank(ctx: RankContext, plan: dict) -> dict:
    """Every op of `plan` at every size; every rank returns the same rows."""
    rows = []
    for op in plan["ops"]:
        config = BenchConfig(algos=(NATIVE,), op=op, sizes_bytes=tuple(plan["sizes_bytes"]), dtype="float32",
                             iters=plan["iters"], warmup=plan["warmup"], num_ranks=ctx.world_size,
                             timeout_s=plan["timeout_s"])
        rows += bench_rank(ctx, config)
    return {"rows": rows, "world_size": ctx.world_size}


def main(argv: list[str] | None = None) -> int:
    return rank_main(check_rank, "One rank of `fabriclab validate collectives`.", "where rank 0 writes the rows",
                     argv)


if __name__ == "__main__":
    sys.exit(main())
