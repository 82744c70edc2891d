"""The routing options of a cluster's network, shared by `simulate collective --cluster`, `whatif llm` and
`plan`: how flows find a spine (`--routing`), the QPs NCCL opens per connection (`--qps`), the transport's
congestion control (`--transport`) and how many draws of the hashes to report over (`--seeds`).

Try it: `fabriclab simulate collective --cluster roce-h100 --gpus 256 --sizes 256MB --routing ecmp --seeds 8`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Optional

import typer

ClusterRoutingOption = Annotated[Optional[str], typer.Option(
    "--routing", metavar="NAME",
    help="How flows find a spine: ideal (D-mod-K), ecmp (each flow hashed to one path) or adaptive (default: the "
         "cluster's network.routing).")]
QpsOption = Annotated[Optional[str], typer.Option(
    "--qps", metavar="N", help="QPs NCCL opens per connection (NCCL_IB_QPS_PER_CONNECTION), each hashed by "
                               "itself (default: the cluster's).")]
TransportOption = Annotated[Optional[str], typer.Option(
    "--transport", metavar="NAME", help="Congestion control on an overloaded link: ideal, roce (DCQCN + PFC) or "
                                        "ib (credits) (default: the cluster's).")]
SeedsOption = Annotated[str, typer.Option(
    "--seeds", metavar="N", help="Draws of ECMP's hashes (a job's change at every launch): the median and the "
                                 "90th percentile over N.")]


def routed_cluster(cluster, routing: str | None, qps: str | None, transport: str | None):
    """The cluster with the options' routing, QPs and transport (itself where none is given); a
    ValueError names the option to change."""
    from fabriclab.cli.options import parse_count
    from fabriclab.fabric.cluster import ROUTINGS, TRANSPORTS

    changes = {}
    if routing is not None:
        word = "ideal" if routing.strip().lower() == "dmodk" else routing.strip().lower()
        if word not in ROUTINGS:
            raise ValueError(f"--routing {routing!r}: use one of {', '.join(ROUTINGS)}")
        changes["routing"] = word
    if transport is not None:
        word = transport.strip().lower()
        if word not in TRANSPORTS:
            raise ValueError(f"--transport {transport!r}: use one of {', '.join(TRANSPORTS)}")
        changes["transport"] = word
    if qps is not None:
        changes["qps_per_connection"] = parse_count(qps, "--qps", maximum=64)
    if not changes:
        return cluster
    network = replace(cluster.network, **changes)
    label = " ".join(f"{v}" if k != "qps_per_connection" else f"{v} QPs" for k, v in changes.items())
    return replace(cluster, network=network, name=f"{cluster.name} {label}")


def parse_seeds(text: str | int) -> int:
    """`--seeds`: draws, 1 to 256."""
    from fabriclab.cli.options import parse_count

    return parse_count(text, "--seeds", maximum=256)
