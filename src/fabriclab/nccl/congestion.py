"""What congestion control does to a collective whose flows ask a link for more than it carries.

The flow model shares an overloaded link max-min fairly and keeps it full. A RoCE fabric does not: once a
switch queue passes its ECN threshold, DCQCN cuts the senders' rates, and with the rate-increase timer and
additive step of a production configuration they come back slowly, so the link runs below its rate for
the rest of the transfer; PFC pauses spread the queue to flows that do not cross the link. The mechanism,
with three parameters per transport (`TRANSPORTS`):

* **overload** `x`: the load a link is offered when every flow runs at the rate its NIC, PCIe and NVLink
  allow, over the link's rate, at the busiest spine link (with the hashed paths of `nccl/routing.py`, the
  mean over its draws of the busiest link's). `x <= 1`: nothing happens.
* **onset**: the excess `(x - 1) x rate` fills the queue to the ECN threshold before the first cut:
  `t_on = onset_bytes / ((x - 1) x link rate)`; a collective shorter than that never feels it.
* **settle**: after the cut the link carries `settle_share` of its rate: `T = t_on + (T - t_on) / settle`.
* **recovery**: an all-to-all sends every flow across the overloaded tier to every receiver, so every flow
  is cut, deeply (many senders per queue); they ramp back at the rate-increase timer: `T >= t_on +
  recovery_s`.

`roce`: DCQCN and PFC as SimAI 1.6's ns-3 configuration runs them (`inputs/SimAI.conf`: CC_MODE 1,
RP_TIMER 900 us, RATE_AI 50 Mb/s, FAST_RECOVERY_TIMES 1, KMIN 800 KB at 400 Gb/s). recovery_s is its
RP_TIMER; settle_share and onset_bytes were fitted on packet-level runs of 32 H100s (4 servers, 2 leaves,
1:1-4:1; `docs/measurements/simai/`) and checked on runs they were not fitted on (64 GPUs, rail and plain
trees). `ib`: InfiniBand's credit flow control loses no packet and cuts no rate: an overloaded link stays
full (the flow model's answer); its cost is the head-of-line blocking this model leaves out. `ideal`: none.

Try it: `python -c "from fabriclab.nccl.congestion import demo; demo()"`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, kw_only=True)
class Transport:
    """How a transport's congestion control treats an overloaded link."""

    settle_share: float
    """Share of the link's rate its flows settle at after the rate cut."""
    onset_bytes: float
    """Excess bytes a link queues before its senders are cut (the ECN threshold's effect)."""
    recovery_s: float
    """Time all-to-all flows, cut deep, take to come back (the rate-increase timer)."""
    source: str


TRANSPORTS: dict[str, Transport | None] = {
    "ideal": None,
    "roce": Transport(settle_share=0.56, onset_bytes=3.0e6, recovery_s=900e-6,
                      source="DCQCN + PFC as SimAI 1.6's ns-3 runs them (SimAI.conf); settle and onset fitted on "
                             "32-GPU packet-level runs"),
    "ib": None,  # credits: lossless, no rate cut; the flow model's full link
}


@dataclass(frozen=True)
class Overload:
    """How hard a collective's flows press on the busiest spine link."""

    ratio: float
    """Offered load over the link's rate (<= 1: no congestion)."""
    link_Bps: float
    """That link's rate."""
    all_to_all: bool


def congested_seconds(data_s, overload: Overload | None, transport: str) -> np.ndarray:
    """The data time of a collective (its bytes at the routed link time) with the transport's congestion
    control on an overloaded link (module doc); unchanged where nothing is overloaded."""
    data_s = np.asarray(data_s, dtype=np.float64)
    model = TRANSPORTS.get(transport)
    if model is None or overload is None or overload.ratio <= 1.0 + 1e-9:
        return data_s
    onset = model.onset_bytes / ((overload.ratio - 1.0) * overload.link_Bps)
    late = np.maximum(data_s - onset, 0.0)
    out = np.minimum(data_s, onset) + late / model.settle_share
    if overload.all_to_all:
        out = np.maximum(out, onset + model.recovery_s)
    return out


def offered_overload(topo, router, offsets: np.ndarray, links: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Per link: the load offered when each flow runs at what the links off the spine tier allow, over the
    link's rate (only spine links are returned non-zero)."""
    first = router.spine_link(0, 0, False)
    last = first + 2 * router.num_leaves * router.num_spines
    per_entry = np.repeat(size, np.diff(offsets))
    load = np.bincount(links, weights=per_entry, minlength=topo.num_links) / topo.bandwidth_Bps
    edge = load.copy()
    edge[first:last] = 0.0
    t_edge = float(edge.max())
    if t_edge <= 0:
        return np.zeros_like(load)
    out = np.zeros_like(load)
    out[first:last] = load[first:last] / t_edge  # at the edge-limited rates, over each spine link's rate
    return out


def demo() -> None:
    """A 256 MiB ring's data time at overloads 0.5 to 2 on RoCE (2 ms alone)."""
    for ratio in (0.5, 1.0, 1.3, 2.0):
        t = congested_seconds([2e-3], Overload(ratio, 50e9, False), "roce")[0]
        print(f"overload {ratio:.1f}: {t * 1e3:.2f} ms")
