"""The nearest GPU counts an LLM plan can take, per cluster: what to ask for instead of a count it refuses.

A plan takes a GPU count on a cluster when the count fills whole servers (trays of an NVLink domain, as
`fabric/domains.py` places them, or at the power-of-two use the plan also tries: 64 of an NVL72's 72) and
some parallel configuration splits it and the global batch (`space.divides`: DP divides the batch). For a
count it refuses, `nearest_sizes` gives per cluster the nearest such counts below and above (8,000 GPUs of
Llama 3 405B at a batch of 2,048: 7,936 or 8,192, on 8-GPU servers and on NVL72 racks alike), the global
batches nearest the one asked for that would split the count itself (2,040 or 2,050), and, for racks bought
whole, the nearest whole-rack counts with the batches that split them (7,992 or 8,064 GPUs on racks of 72:
8,064 at a batch of 2,044 or 2,052). Memory is not checked here: the plan says what fits. `describe_sizes`
says it in one sentence for the error.

Try it: `fabriclab plan --model llama3-405b --gpus 8000 --clusters hgx-b200,gb200-nvl72`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabriclab.fabric.cluster import ClusterModel
from fabriclab.fabric.domains import domain_size, domain_view, power_of_two_use, spans_servers, with_domain_gpus
from fabriclab.plan.llm.space import SearchBounds, divides
from fabriclab.workload.transformer import TransformerSpec

REACH = 2  # sizes are looked for between gpus / REACH and gpus x REACH, batches between gbs / REACH and gbs x REACH


@dataclass(frozen=True, kw_only=True)
class NearestSizes:
    """What a cluster takes near a GPU count and a global batch it refuses."""

    cluster: str
    """The cluster as the user named it."""
    gpus: int
    """The GPU count asked for."""
    gbs: int
    """The global batch asked for."""
    below: int | None
    """The largest smaller GPU count the plan takes at the same global batch; None within a factor REACH."""
    above: int | None
    """The smallest larger one; None within a factor REACH."""
    batches: tuple[int | None, int | None]
    """Global batches nearest the one asked for (below, above) at which `gpus` itself splits; (None, None):
    `gpus` does not fill the cluster's servers."""
    domain_gpus: int = 0
    """GPUs of an NVLink domain bought whole (72 on an NVL72 rack); 0 when the server is the domain."""
    racks: tuple[tuple[int, tuple[int | None, int | None]], ...] = ()
    """Whole-domain GPU counts nearest `gpus` (below, above), each with the global batches nearest the one asked
    for that split it (the batch itself when it does)."""


def _views(cluster: ClusterModel, gpus: int) -> list[ClusterModel]:
    """The cluster as each placement the plan tries sees `gpus` GPUs (none when they fill no whole trays)."""
    out = []
    used = power_of_two_use(cluster) if not cluster.server.domain_gpus_used else 0
    for c in (cluster, *([with_domain_gpus(cluster, used)] if used and gpus % used == 0 else [])):
        try:
            out.append(domain_view(c, gpus))
        except ValueError:
            continue
    return out


def takes(spec: TransformerSpec, cluster: ClusterModel, gpus: int, *, gbs: int, seq: int,
          bounds: SearchBounds = SearchBounds()) -> bool:
    """Whether the plan can place `gpus` GPUs on `cluster` and split them and the global batch `gbs`."""
    return gpus % cluster.server.gpus_per_server == 0 and any(
        divides(spec, gpus, v.server.gpus_per_server, gbs=gbs, seq=seq, bounds=bounds) for v in _views(cluster, gpus))


def _nearest(fits, start: int, step: int, lowest: int, highest: int) -> tuple[int | None, int | None]:
    """The nearest multiples of `step` below and above `start` (within [lowest, highest]) where `fits` holds."""
    below = next((n for n in range((start - 1) // step * step, lowest - 1, -step) if n > 0 and fits(n)), None)
    above = next((n for n in range((start // step + 1) * step, highest + 1, step) if fits(n)), None)
    return below, above


def _batches(spec, cluster, gpus: int, gbs: int, seq: int, bounds) -> tuple[int | None, int | None]:
    if gpus % cluster.server.gpus_per_server or not _views(cluster, gpus):
        return None, None
    if takes(spec, cluster, gpus, gbs=gbs, seq=seq, bounds=bounds):
        return gbs, gbs
    return _nearest(lambda b: takes(spec, cluster, gpus, gbs=b, seq=seq, bounds=bounds), gbs, 1,
                    max(1, gbs // REACH), gbs * REACH)


def nearest_sizes(spec: TransformerSpec, clusters: tuple[tuple[str, ClusterModel], ...], gpus: int, *, gbs: int,
                  seq: int, bounds: SearchBounds = SearchBounds()) -> list[NearestSizes]:
    """Per cluster (name, cluster), the nearest GPU counts below and above `gpus` the plan takes at global batch
    `gbs`, the batches that would split `gpus` itself and, for racks bought whole, the nearest whole-rack
    counts with their batches (module doc)."""
    out = []
    for name, cluster in clusters:
        step = cluster.server.gpus_per_server
        below, above = _nearest(lambda n: takes(spec, cluster, n, gbs=gbs, seq=seq, bounds=bounds), gpus, step,
                                gpus // REACH, gpus * REACH)
        d = domain_size(cluster.server) if spans_servers(cluster) else 0
        racks = ()
        if d:
            whole = ((gpus - 1) // d * d, (gpus // d + 1) * d)
            racks = tuple((n, _batches(spec, cluster, n, gbs, seq, bounds)) for n in whole if n > 0)
        out.append(NearestSizes(cluster=name, gpus=gpus, gbs=gbs, below=below, above=above, domain_gpus=d, racks=racks,
                                batches=_batches(spec, cluster, gpus, gbs, seq, bounds)))
    return out


def _either(pair: tuple[int | None, int | None]) -> str:
    return " or ".join(f"{n:,}" for n in dict.fromkeys(pair) if n is not None)


def describe_sizes(sizes: list[NearestSizes]) -> str:
    """`on hgx-b200 7,936 or 8,192 GPUs, or 8,000 with --gbs 2,040 or 2,050; on gb200-nvl72 ...`: one clause per
    cluster, for the error that refuses the count."""
    parts = []
    for s in sizes:
        text = f"on {s.cluster} {_either((s.below, s.above)) or 'no count within a factor 2'} GPUs"
        if s.batches == (s.gbs, s.gbs):
            text += f", or {s.gpus:,} as asked"
        elif any(s.batches):
            text += f", or {s.gpus:,} with --gbs {_either(s.batches)}"
        racks = [f"{n:,}" if b == (s.gbs, s.gbs) else f"{n:,} with --gbs {_either(b)}" if any(b) else f"{n:,}"
                 for n, b in s.racks if n != s.gpus]
        if racks:
            text += f" (whole racks of {s.domain_gpus}: {', '.join(racks)})"
        parts.append(text)
    return "; ".join(parts)
