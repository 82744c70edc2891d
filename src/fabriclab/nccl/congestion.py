"""What congestion control does to a collective whose flows ask a link for more than it carries.

The flow model shares an overloaded link max-min fairly and keeps it full. A RoCE fabric does not: once a
switch queue passes its ECN threshold, DCQCN cuts the senders' rates, and with the rate-increase timer and
additive step of a production configuration they come back slowly; PFC pauses spread the queue to flows
that do not cross the link. The mechanism, with four parameters per transport (`TRANSPORTS`):

* **overload** `x`: the load a spine link is offered when every flow runs at the rate its NIC, PCIe and
  NVLink allow, over the link's rate (`nccl/routing.py` gives it for the routing: the busiest link of a
  kept hash, or the tier's mean raised by a per-message hash's loss). `x <= 1`: nothing happens.
* **onset**: the excess `(x - 1) x rate` fills the queue to the ECN threshold before the first cut:
  `t_on = onset_bytes / ((x - 1) x link rate)`; a collective shorter than that never feels it.
* **settle**: flows that start anew at line rate with every message (each message its own flow, as SimAI's
  MockNccl sends a ring's chunks) are cut once each and replaced at full rate, so the link runs at
  `settle_restart` of its rate after the onset: `T = t_on + (T - t_on) / settle`. Flows that live through
  the collective settle near their fair share (`settle_steady`).
* **recovery**: those long-lived flows, cut deep, end at the rate-increase timer: `recovery_s` more.

`roce`: DCQCN and PFC as SimAI 1.6's ns-3 configuration runs them (`inputs/SimAI.conf`: CC_MODE 1,
RP_TIMER 900 us, RATE_AI 50 Mb/s, FAST_RECOVERY_TIMES 1, KMIN 800 KB at 400 Gb/s); the four parameters
were fitted on its packet-level runs of 32 H100s (4 servers, 2 leaves, 1:1-4:1; `ROCE_FIT`,
`docs/measurements/simai/fit-32gpu.json`) and are checked on runs they were not fitted on (64 GPUs, rail and
plain trees), with what the fabric adds to a ring's or tree's data hidden under its steps' latency as
`nccl/predict.py` says (fitted before that hiding, the onset came out at 5 MB: it stood in for it). The
fitted onset, 1 MB, sits near the configuration's KMIN; the recovery, 750 us, near its RP_TIMER. `ib`: InfiniBand's credit
flow control loses no packet and cuts no rate: an overloaded link stays full (the flow model's answer); its
cost is the head-of-line blocking this model leaves out. `ideal`: none.

Try it: `python -c "from fabriclab.nccl.congestion import demo; demo()"`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# The fit (`python -m fabriclab.bench.simai.fit docs/measurements/simai/fit-32gpu.json` prints it and what each
# case gives): the 2:1 and 4:1 runs of 32 H100s, all-reduce, all-gather and all-to-all at 16-256 MiB.
ROCE_FIT = {"onset_bytes": 1.0e6, "settle_restart": 0.7, "settle_steady": 1.0, "recovery_s": 750e-6}


@dataclass(frozen=True, kw_only=True)
class Transport:
    """How a transport's congestion control treats an overloaded link."""

    onset_bytes: float
    """Excess bytes a link queues before its senders are cut (the ECN threshold's effect)."""
    settle_restart: float
    """Share of the link's rate carried by flows that start anew at line rate with every message (each
    message its own flow: cut once before it ends, then replaced by the next at full rate)."""
    settle_steady: float
    """Share of the link's rate carried by flows that live through the collective (cut, then held near their
    fair share by the rate control's oscillation)."""
    recovery_s: float
    """What a collective of such flows adds at its end: the last flows, cut deep, come back at the
    rate-increase timer."""
    source: str


TRANSPORTS: dict[str, Transport | None] = {
    "ideal": None,
    "roce": Transport(onset_bytes=ROCE_FIT["onset_bytes"], settle_restart=ROCE_FIT["settle_restart"],
                      settle_steady=ROCE_FIT["settle_steady"], recovery_s=ROCE_FIT["recovery_s"],
                      source="DCQCN + PFC as SimAI 1.6's ns-3 runs them (SimAI.conf); fitted on its 32-GPU "
                             "packet-level runs (docs/measurements/simai/fit-32gpu.json)"),
    "ib": None,  # credits: lossless, no rate cut; the flow model's full link
}


@dataclass(frozen=True)
class Overload:
    """How hard a collective's flows press on the busiest spine link."""

    ratio: float
    """Offered load over the link's rate (<= 1: no congestion)."""
    link_Bps: float
    """That link's rate."""
    restarts: bool
    """The flows start anew with every message (`network.hash_per_message` on a ring or tree)."""


def congested_seconds(data_s, overload: Overload | None, transport: str) -> np.ndarray:
    """The data time of a collective (its bytes at the routed link time) with the transport's congestion
    control on an overloaded link (module doc); unchanged where nothing is overloaded."""
    data_s = np.asarray(data_s, dtype=np.float64)
    model = TRANSPORTS.get(transport)
    if model is None or overload is None or overload.ratio <= 1.0 + 1e-9:
        return data_s
    onset = model.onset_bytes / ((overload.ratio - 1.0) * overload.link_Bps)
    late = np.maximum(data_s - onset, 0.0)
    settle = model.settle_restart if overload.restarts else model.settle_steady
    out = np.minimum(data_s, onset) + late / settle
    if not overload.restarts:
        out = out + np.where(late > 0, model.recovery_s, 0.0)
    return out


def demo() -> None:
    """A 2 ms data time at overloads 0.5 to 2 on RoCE, for restarting and long-lived flows."""
    for ratio in (0.5, 1.0, 1.3, 2.0):
        t = [congested_seconds([2e-3], Overload(ratio, 50e9, r), "roce")[0] for r in (True, False)]
        print(f"overload {ratio:.1f}: {t[0] * 1e3:.2f} ms restarting, {t[1] * 1e3:.2f} ms long-lived")
