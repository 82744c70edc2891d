"""How often a training cluster's components fail: a rate per component-hour for each kind, with its source.

Kinds (`KINDS`): `gpu` (the GPU itself: its SRAM, system processor, NVLink, thermal interface and silent data
corruption), `hbm`, `host` (CPU, memory, SSD, power supply, chassis, I/O board, unplanned host maintenance),
`nic`, `host_cable` (NIC to leaf), `switch` (every tier: leaf, spine, core; the tier decides what a failure
stops, `domains.py`), `switch_cable` (switch to switch), `nvlink_tray` (an NVLink switch tray of a rack-scale
domain) and `software` (bugs, NCCL watchdog timeouts, dependencies; per GPU, as the ranks a job runs).
Planned interruptions (firmware, configuration, data set changes) are a rate per job, not per component.

Where each rate comes from (`LLAMA3`, the default table):

* DERIVED from the Llama 3 405B run: Dubey et al., "The Llama 3 Herd of Models" (2024), Table 5, lists the
  root causes of the 419 unexpected interruptions in a 54-day snapshot of pre-training on 16,384 H100 GPUs
  in 2,048 servers (466 with the 47 planned ones). `gpu`, `hbm`, `host`, `nic` and `software` are their
  counts divided by the snapshot's component-hours (16,384 GPUs, ranks or NICs, 2,048 servers, 1,296 h). The
  table prints 30.1 % beside Faulty GPU's 148, but its counts sum to 419 and 148/419 is 35.3 %; the counts
  are taken.
* INDEPENDENT, `switch`: Singh et al., "Surviving switch failures in cloud datacenters" (ACM SIGCOMM CCR
  51(2), 2021): of about 180,000 switches in a cloud provider's datacenters, 2 % fail within 3 months of
  entering production, -ln(0.98) / 2,190 h per switch-hour. `nvlink_tray` takes it too (an NVLink switch
  tray is a switch; no rate is published).
* DERIVED, `host_cable`: Table 5's 35 "network switch/cable" interruptions, less those the switch rate gives
  the run's leaves (the 512 leaves fabriclab counts for 16,384 GPUs on `dgx-h100`: 8 rails of 64 leaves of
  32 NIC ports; a leaf failure stops the job, a spine failure is routed around), over the run's 16,384
  NIC-leaf cables. `switch_cable` takes the same rate (no separate source).
* Repair times (how long a failed part is out, which a job waits when no spare stands in) are round
  assumptions, said as such: a server (GPU, HBM, host, NIC) a day, a switch or a cable 4 hours.

Checked, not fitted (tests/whatif/goodput): Kokolis et al., "Revisiting Reliability in Large-Scale Machine
Learning Research Clusters" (HPCA 2025), fit a failure rate per node to Meta's two A100 research clusters,
6.50 (RSC-1) and 2.34 (RSC-2) failures per 1,000 node-days, and a mean time to failure inversely
proportional to the job's size. The Llama 3 run's own rate, 419 / (2,048 x 54) = 3.79 per 1,000 node-days,
lies between; `RSC1` and `RSC2` are the default table scaled to each of their rates (the per-component
shares Llama 3's), so a job can be costed at either end.

Try it: `python -c "from fabriclab.whatif.goodput.rates import LLAMA3; print(LLAMA3.describe())"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

KINDS = ("gpu", "hbm", "host", "nic", "host_cable", "switch", "switch_cable", "nvlink_tray", "software")

# Dubey et al. 2024, Table 5: (root cause, our kind, unexpected interruptions in the 54-day snapshot).
LLAMA3_TABLE5 = (
    ("Faulty GPU", "gpu", 148), ("GPU HBM3 Memory", "hbm", 72), ("Software Bug", "software", 54),
    ("Network Switch/Cable", "network", 35), ("Host Maintenance", "host", 32), ("GPU SRAM Memory", "gpu", 19),
    ("GPU System Processor", "gpu", 17), ("NIC", "nic", 7), ("NCCL Watchdog Timeouts", "software", 7),
    ("Silent Data Corruption", "gpu", 6), ("GPU Thermal Interface + Sensor", "gpu", 6), ("SSD", "host", 3),
    ("Power Supply", "host", 3), ("Server Chassis", "host", 2), ("IO Expansion Board", "host", 2),
    ("Dependency", "software", 2), ("CPU", "host", 2), ("System Memory", "host", 2))
LLAMA3_GPUS, LLAMA3_SERVERS, LLAMA3_DAYS = 16384, 2048, 54
LLAMA3_UNEXPECTED, LLAMA3_PLANNED = 419, 47
LLAMA3_HOURS = LLAMA3_DAYS * 24
# The leaves fabriclab counts for the run's 16,384 GPUs on dgx-h100 (plan/cluster.cluster_bill: 8 rails x 2,048
# servers / 32 NIC ports per leaf); the switch failures they account for are taken out of Table 5's 35.
LLAMA3_LEAVES = 512
# Singh et al. 2021: 2 % of switches fail within 3 months (91.25 days) of entering production.
SWITCH_PER_HOUR = -math.log(1 - 0.02) / (91.25 * 24)
# Kokolis et al. 2025: failures per node-day fitted on RSC-1 and RSC-2 (A100 servers of 8 GPUs).
RSC1_PER_NODE_DAY, RSC2_PER_NODE_DAY = 6.50e-3, 2.34e-3
SERVER_REPAIR_H, SWITCH_REPAIR_H, CABLE_REPAIR_H = 24.0, 4.0, 4.0  # assumed, module doc

_LLAMA3 = "Dubey et al. 2024 (Llama 3), Table 5"


@dataclass(frozen=True, kw_only=True)
class ComponentRate:
    """How often one kind of component fails and how long it stays out."""

    kind: str
    """One of `KINDS`."""
    per_hour: float
    """Failures per component-hour."""
    repair_h: float
    """Hours a failed component is out (a job without a spare waits that long)."""
    source: str
    """Where the rate comes from, and whether it is derived from the Llama 3 run or independent of it."""


@dataclass(frozen=True, kw_only=True)
class RateTable:
    """A rate per kind of component, planned interruptions per job, and what the table is."""

    name: str
    """Short name (`llama3`, `rsc1`, `rsc2`)."""
    rates: dict
    """Kind -> ComponentRate, every kind of `KINDS`."""
    planned_per_day: float
    """Planned interruptions per day of a job (maintenance, configuration, data changes): no work is lost."""
    source: str
    """What the table is, in a line."""

    def rate(self, kind: str) -> ComponentRate:
        return self.rates[kind]

    def describe(self) -> str:
        lines = [f"{self.name}: {self.source}; planned {self.planned_per_day:.3g} per job-day"]
        lines += [f"  {r.kind}: {r.per_hour:.3g} per hour, out {r.repair_h:g} h ({r.source})"
                  for r in self.rates.values()]
        return "\n".join(lines)


def _table5(kind: str) -> int:
    return sum(count for _, k, count in LLAMA3_TABLE5 if k == kind)


def _llama3() -> RateTable:
    per = {"gpu": LLAMA3_GPUS, "hbm": LLAMA3_GPUS, "nic": LLAMA3_GPUS, "host": LLAMA3_SERVERS,
           "software": LLAMA3_GPUS}
    what = {"gpu": "GPUs", "hbm": "GPUs", "nic": "NICs", "host": "servers", "software": "ranks"}
    rates = {}
    for kind, count in per.items():
        repair = 0.0 if kind == "software" else SERVER_REPAIR_H
        rates[kind] = ComponentRate(kind=kind, per_hour=_table5(kind) / (count * LLAMA3_HOURS), repair_h=repair,
                                    source=f"derived: {_llama3_rows(kind)} / ({count:,} {what[kind]} x "
                                           f"{LLAMA3_HOURS:,} h), {_LLAMA3}")
    switch = ComponentRate(kind="switch", per_hour=SWITCH_PER_HOUR, repair_h=SWITCH_REPAIR_H,
                           source="independent: 2 % of datacenter switches fail within 3 months, Singh et al., "
                                  "'Surviving switch failures in cloud datacenters', SIGCOMM CCR 2021")
    leaf_failures = LLAMA3_LEAVES * SWITCH_PER_HOUR * LLAMA3_HOURS
    cable = (_table5("network") - leaf_failures) / (LLAMA3_GPUS * LLAMA3_HOURS)
    cable_source = (f"derived: ({_table5('network')} network interruptions - {leaf_failures:.1f} the switch rate "
                    f"gives {LLAMA3_LEAVES} leaves) / ({LLAMA3_GPUS:,} NIC cables x {LLAMA3_HOURS:,} h), {_LLAMA3}")
    rates.update(
        host_cable=ComponentRate(kind="host_cable", per_hour=cable, repair_h=CABLE_REPAIR_H, source=cable_source),
        switch=switch,
        switch_cable=ComponentRate(kind="switch_cable", per_hour=cable, repair_h=CABLE_REPAIR_H,
                                   source="assumed: the NIC cable's rate"),
        nvlink_tray=replace(switch, kind="nvlink_tray", source="assumed: the switch rate (no public rate)"))
    return RateTable(name="llama3", rates={k: rates[k] for k in KINDS},
                     planned_per_day=LLAMA3_PLANNED / LLAMA3_DAYS,
                     source=f"component rates derived from Llama 3 405B's 419 unexpected interruptions in 54 days "
                            f"({_LLAMA3}), switches from Singh et al. 2021")


def _llama3_rows(kind: str) -> str:
    """`(148 + 19 + ...)`: Table 5's counts of a kind, in brackets where there are several."""
    counts = [str(count) for _, k, count in LLAMA3_TABLE5 if k == kind]
    return counts[0] if len(counts) == 1 else f"({' + '.join(counts)})"


NODE_KINDS = ("gpu", "hbm", "host", "nic", "host_cable", "software")  # what fails per 8-GPU, 8-NIC server


def per_node_day(table: RateTable, gpus: int = 8, nics: int = 8) -> float:
    """Failures per node-day of the node's own parts (GPUs, HBM, host, NICs and their cables, software) on a
    server of `gpus` GPUs and `nics` NICs: Kokolis et al.'s r_f in the table's terms."""
    count = {"gpu": gpus, "hbm": gpus, "host": 1, "nic": nics, "host_cable": nics, "software": gpus}
    return 24 * sum(count[k] * table.rate(k).per_hour for k in NODE_KINDS)


def scaled(table: RateTable, rf_per_node_day: float, name: str, source: str) -> RateTable:
    """`table` with every node part's rate scaled so that an 8-GPU server fails `rf_per_node_day` times a day
    (the shares between the parts kept; switches and planned interruptions as they are)."""
    factor = rf_per_node_day / per_node_day(table)
    rates = {k: replace(r, per_hour=r.per_hour * factor, source=f"{r.source}, x {factor:.3g} to {name}")
             if k in NODE_KINDS else r for k, r in table.rates.items()}
    return replace(table, name=name, rates=rates, source=source)


LLAMA3 = _llama3()
RSC1 = scaled(LLAMA3, RSC1_PER_NODE_DAY, "rsc1", "Llama 3's shares at RSC-1's 6.50 failures per 1,000 node-days "
              "(Kokolis et al., HPCA 2025)")
RSC2 = scaled(LLAMA3, RSC2_PER_NODE_DAY, "rsc2", "Llama 3's shares at RSC-2's 2.34 failures per 1,000 node-days "
              "(Kokolis et al., HPCA 2025)")
TABLES = {t.name: t for t in (LLAMA3, RSC1, RSC2)}


def rate_table(name: str) -> RateTable:
    """The rate table called `name` (`TABLES`); a ValueError naming them otherwise."""
    key = name.strip().lower()
    if key not in TABLES:
        raise ValueError(f"--failure-rates {name!r}: use one of {', '.join(TABLES)} (llama3: rates derived from "
                         f"the Llama 3 405B run; rsc1, rsc2: scaled to Meta's research clusters' rates)")
    return TABLES[key]
