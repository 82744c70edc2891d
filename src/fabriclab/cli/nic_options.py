"""The server and network options of `plan` (NICs per server, rails, switch radix) and the `--nic` swap of
a cluster, shared by `plan` and `whatif`. (A long plan's progress lines come from its point runner,
`report/points`.)
"""

from __future__ import annotations

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



def swap_nic(cluster, nic: str, where: str | None):
    """`cluster` with its NICs swapped for the link preset `nic` (`fabric.cluster.swap_nic`)."""
    from fabriclab.fabric.cluster import swap_nic as swap
    from fabriclab.fabric.links import link_preset

    if cluster is None:
        raise ValueError(f"--nic {nic} swaps the NICs of a --cluster: give --cluster FILE|PRESET, or compare "
                         f"fabrics without one with --fabrics")
    return swap(cluster, link_preset(nic), where or "")
