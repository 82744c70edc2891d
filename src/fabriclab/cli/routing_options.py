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


JobPlacementOption = Annotated[Optional[str], typer.Option(
    "--placement", metavar="NAME", help="Where the job's servers sit: packed (the first, leaf by leaf) or scattered "
                                        "(a busy scheduler's draw, --busy; over --seeds draws).")]
BusyOption = Annotated[Optional[str], typer.Option(
    "--busy", metavar="SHARE", help="With --placement scattered: the share of the cluster's servers other jobs "
                                    "hold (default 0.5).")]


def routed_cluster(cluster, routing: str | None, qps: str | None, transport: str | None,
                   placement: str | None = None, busy: str | None = None):
    """The cluster with the options' routing, QPs, transport and job placement (itself where none is
    given); a ValueError names the option to change."""
    from fabriclab.cli.options import parse_count
    from fabriclab.fabric.cluster import ROUTINGS, TRANSPORTS

    changes = _placement(placement, busy)
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
    label = " ".join(f"{v} QPs" if k == "qps_per_connection" else f"{v:g} busy" if k == "busy_share" else f"{v}"
                     for k, v in changes.items())
    return replace(cluster, network=network, name=f"{cluster.name} {label}")


def routing_ignored(cluster, qps: str | None, seeds: str | int | None) -> list:
    """The rules (`cli/ignored.py`) of `--qps` and `--seeds` that the cluster's network, as routed, ignores."""
    n = cluster.network
    drawn = n.routing == "ecmp" or n.placement == "scattered"  # nccl/routing.draws
    return [
        (qps is not None and n.routing != "ecmp", "--qps",
         f"with routing {n.routing}: only ECMP hashes each QP to a spine; add --routing ecmp or drop it"),
        (seeds is not None and parse_seeds(seeds) > 1 and not drawn, "--seeds",
         f"with routing {n.routing} and placement {n.placement}: nothing is drawn, one answer; add --routing "
         f"ecmp or --placement scattered, or drop it"),
    ]


def parse_seeds(text: str | int) -> int:
    """`--seeds`: draws, 1 to 256."""
    from fabriclab.cli.options import parse_count

    return parse_count(text, "--seeds", maximum=256)


def _placement(placement: str | None, busy: str | None) -> dict:
    """`--placement` and `--busy` as network fields (none where neither is given)."""
    from fabriclab.fabric.cluster import PLACEMENTS

    if placement is None:
        if busy is not None:
            raise ValueError("--busy goes with --placement scattered: add it, or drop --busy")
        return {}
    word = "packed" if placement.strip().lower() == "linear" else placement.strip().lower()
    if word not in PLACEMENTS:
        raise ValueError(f"--placement {placement!r}: a job on a cluster is {' or '.join(PLACEMENTS)}")
    if word == "packed":
        if busy is not None:
            raise ValueError("--busy goes with --placement scattered: a packed job holds the first servers")
        return {"placement": word}
    try:
        share = 0.5 if busy is None else float(busy.strip().rstrip("%")) / (100 if busy.strip().endswith("%") else 1)
    except ValueError:
        raise ValueError(f"--busy {busy!r}: give a share of the cluster's servers, e.g. 0.5 or 50%") from None
    if not 0 <= share < 1:
        raise ValueError(f"--busy {busy!r}: give a share in [0, 1), e.g. 0.5")
    return {"placement": word, "busy_share": share}
