"""Run the stencil mini-app (`runtime.stencil`): local ranks, a torchrun-style launch, or one emulated host each.

`run_stencil(config, num_ranks)` spawns local ranks, or joins the launch found in the environment (under
`fabriclab emu run`, torchrun, Slurm); it returns the summary every rank agrees on: process grid, block,
compute and communication time per step (means over ranks and steps), the slowest rank's step.
`python -m fabriclab.bench.stencil.run --config cfg.json --out result.json` is the entry point one rank per
emulated host runs (what `stencil scale` starts); rank 0 writes the summary.

Try it: `fabriclab stencil run --np 4 --cells 128 --steps 20 --work 1`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from fabriclab.runtime.launch import LaunchConfig, launch
from fabriclab.runtime.stencil import StencilConfig, stencil_rank


def run_stencil(config: StencilConfig, num_ranks: int = 1, *, timeout_s: float = 120.0) -> tuple[dict, bool]:
    """(summary, is_reporter): run the mini-app on `num_ranks` local ranks or the launch in the environment.

    `is_reporter` is False in every rank but 0 of a joined launch (they should print nothing)."""
    outcome = launch(stencil_rank, (config,), config=LaunchConfig(num_ranks=num_ranks, timeout_s=timeout_s,
                                                                  device=config.device, backend=config.backend))
    summary = dict(outcome.results[min(outcome.results)])
    summary["launch"] = outcome.placement
    # CPU time, not wall: stays the cost of one core when more ranks than cores share the machine.
    summary["compute_per_cell_s"] = summary["compute_cpu_s"] / summary["cells_per_rank"]
    summary["config"] = asdict(config)
    return summary, outcome.is_reporter


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One rank of the stencil mini-app (fabriclab stencil scale).")
    parser.add_argument("--config", type=Path, required=True, help="StencilConfig as JSON")
    parser.add_argument("--out", type=Path, required=True, help="where rank 0 writes the summary")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for a stuck rank")
    args = parser.parse_args(argv)
    config = StencilConfig(**json.loads(args.config.read_text()))
    summary, reporter = run_stencil(config, timeout_s=args.timeout)
    if reporter:
        args.out.write_text(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
