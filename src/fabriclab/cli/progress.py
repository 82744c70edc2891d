"""Progress lines for long plans, and the `--nic` swap of a cluster, shared by `plan` and `whatif`.

A plan of many options or of thousands of GPUs can run for minutes; `progress_printer` returns a
callback that prints `plan: 3/10 options, 41 s, about 95 s left (NDR, 16384 GPUs, ...)` on stderr after
each option (a terminal and a pipe alike: plain lines, no cursor tricks), once a plan is large enough
to be slow (LARGE_GPUS GPUs or LARGE_OPTIONS options) or has run more than QUIET_S seconds.
"""

from __future__ import annotations

import sys
import time
from typing import Annotated, Optional

import typer

NicsPerServerOption = Annotated[Optional[int], typer.Option(
    help="NICs per server, each shared by gpus-per-server / nics-per-server GPUs (default 1; a DGX: 8; not with "
         "--cluster).")]
RailsOption = Annotated[bool, typer.Option(
    "--rails", help="Rail-optimised: NIC j of every server on rail j's leaves (with --nics-per-server > 1).")]
RadixOption = Annotated[Optional[int], typer.Option(
    help="Ports per switch (default: the fabric's generation, e.g. NDR 64, XDR 144): the tree gets the levels "
         "this radix forces.")]
NicOption = Annotated[Optional[str], typer.Option(
    help="With --cluster: swap its NICs for this link preset (what-if: the same servers with e.g. NDR instead of "
         "HDR).")]

LARGE_GPUS = 4096
LARGE_OPTIONS = 10
QUIET_S = 2.0


def progress_printer(spec, stream=None, clock=time.perf_counter):
    """A `progress(done, total, what)` callback for `run_plan` (module doc); `done` 0 announces the run."""
    start = clock()
    big = max(spec.gpus) >= LARGE_GPUS

    def progress(done: int, total: int, what: str) -> None:
        out = stream or sys.stderr
        elapsed = clock() - start
        if done == 0:
            if big or total >= LARGE_OPTIONS:
                print(f"plan: {total} options up to {max(spec.gpus):,} GPUs, a line per option as it finishes",
                      file=out, flush=True)
            return
        if not (big or total >= LARGE_OPTIONS or elapsed > QUIET_S):
            return
        left = elapsed / done * (total - done)
        tail = "done" if done == total else f"about {left:,.0f} s left"
        print(f"plan: {done}/{total} options, {elapsed:,.0f} s, {tail} ({what})", file=out, flush=True)

    return progress


def swap_nic(cluster, nic: str, where: str | None):
    """`cluster` with its NICs swapped for the link preset `nic` (`fabric.cluster.swap_nic`)."""
    from fabriclab.fabric.cluster import swap_nic as swap
    from fabriclab.fabric.links import link_preset

    if cluster is None:
        raise ValueError(f"--nic {nic} swaps the NICs of a --cluster: give --cluster FILE|PRESET, or compare "
                         f"fabrics without one with --fabrics")
    return swap(cluster, link_preset(nic), where or "")
