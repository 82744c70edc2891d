"""Failure domains: what each component's failure takes from a synchronous training job, and how long it waits.

A job is its components (`Components`, counted from the cluster's topology as its price is:
`plan/llm/goodput.job_components`). Per kind (`failure_domains`):

* GPU, HBM, host, NIC: stops the job; its server is out until repaired (the trays of its NVLink domain,
  when the job's groups span the domain and the domain has no free tray).
* NIC-leaf cable: stops the job (not with dual ToR); its server is out until the cable is repaired.
* leaf: stops the job (not with dual ToR); out until the switch is repaired are the servers it serves:
  rail-optimised, one NIC of each of leaf-ports servers; a plain tree, leaf-ports / NICs servers whole.
* spine, core, spine cable: routed around, the job runs on; the spine tier is short of that capacity,
  beyond `ResilienceSpec.spine_spare`, until the repair.
* NVLink switch tray: stops the job; its whole domain is out until the switch is repaired.
* software (per rank): stops the job; nothing is out.

A job restarts on spare servers where there are enough free ones, else waits for the repair. Spares are
a larger cluster's idle servers (`ResilienceSpec.spare_servers` None: never short) or a pool of k: the
servers out for repair at a random moment are taken as Poisson with mean sum(rate x servers out x repair
time) over the kinds (a leaf's batch of servers counted by its mean), and a failure that needs n servers
waits when more than k - n are out (`short_probability`). A rack-scale domain whose job uses fewer GPUs than
it has (64 of an NVL72's 72) keeps its free trays as spares of its own: a failed tray is swapped in the rack.

Try it: `python -c "from fabriclab.whatif.goodput.domains import Components, failure_domains; from
fabriclab.whatif.goodput.rates import LLAMA3; from fabriclab.fabric.resilience import ResilienceSpec;
[print(d) for d in failure_domains(Components(num_gpus=16384, num_servers=2048, num_nics=16384, num_leaves=512,
num_spine_switches=768, num_switch_cables=32768, servers_per_leaf=32), LLAMA3, ResilienceSpec())]"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fabriclab.fabric.resilience import ResilienceSpec


@dataclass(frozen=True, kw_only=True)
class Components:
    """The parts of one job's share of a cluster, and how its failure domains are laid out."""

    num_gpus: int
    """GPUs of the job."""
    num_servers: int
    """Servers (compute trays) of the job."""
    num_nics: int
    """NICs, each with one NIC-leaf cable (two with dual ToR)."""
    num_leaves: int
    """Leaf (top-of-rack) switches the job's NICs hang on (twice as many with dual ToR)."""
    num_spine_switches: int
    """Switches above the leaves (spines, aggregation and core)."""
    num_switch_cables: int
    """Switch-to-switch cables."""
    servers_per_leaf: int
    """Servers a leaf's failure takes from the job: its NIC ports (rail-optimised, one NIC of each) or its
    ports / NICs per server (a plain tree, whole servers)."""
    num_nvlink_trays: int = 0
    """NVLink switch trays of rack-scale domains (an NVL72 rack: 9); 0 when the server is the domain."""
    servers_per_domain: int = 1
    """Servers (trays) one NVLink domain joins; 1 when the server is the domain."""
    spans_domain: bool = False
    """The job's groups span the domain (NCCL treats it as one node), so a failed tray stops the domain."""
    domain_has_spare_trays: bool = False
    """The job leaves trays of each domain free (64 of 72 GPUs), which stand in for a failed tray."""

    @property
    def servers_per_failure(self) -> int:
        """Servers a failed server takes out of the job: itself, or its whole domain when the job spans the
        domain and the domain has no free tray; 0 when a free tray of its own domain stands in."""
        if not self.spans_domain or self.servers_per_domain <= 1:
            return 1
        return 0 if self.domain_has_spare_trays else self.servers_per_domain


@dataclass(frozen=True, kw_only=True)
class FailureDomain:
    """One kind of component of the job: how many, how often, what a failure stops."""

    kind: str
    """The rate table's kind (`rates.KINDS`); `leaf` and `spine` are the switch rate by tier."""
    count: int
    """Components of the job."""
    per_hour: float
    """Failures per component-hour."""
    stops_job: bool
    """A failure interrupts the job (it restarts from its checkpoint)."""
    servers_out: int
    """Servers out of the job until the repair: a restart needs that many spares."""
    repair_h: float
    """Hours until the repair."""
    what: str
    """What a failure does, in words."""

    @property
    def failures_per_hour(self) -> float:
        return self.count * self.per_hour


def failure_domains(c: Components, rates, resilience: ResilienceSpec) -> list[FailureDomain]:
    """Every kind of component of the job with what its failure stops (module doc)."""
    unit = c.servers_per_failure
    dual = resilience.dual_tor

    def domain(kind, count, rate_kind, stops, out, what):
        r = rates.rate(rate_kind)
        return FailureDomain(kind=kind, count=count, per_hour=r.per_hour, stops_job=stops, servers_out=out,
                             repair_h=r.repair_h, what=what)

    server = ("its server" if unit == 1 else f"its domain's {unit} trays" if unit else "a free tray of its domain "
              "stands in")
    rows = [domain("gpu", c.num_gpus, "gpu", True, unit, f"stops the job; {server}"),
            domain("hbm", c.num_gpus, "hbm", True, unit, f"stops the job; {server}"),
            domain("host", c.num_servers, "host", True, unit, f"stops the job; {server}"),
            domain("nic", c.num_nics, "nic", True, unit, f"stops the job; {server}"),
            domain("host_cable", c.num_nics * (2 if dual else 1), "host_cable", not dual, 0 if dual else max(unit, 1),
                   "the NIC's other port carries on" if dual else f"stops the job; {server}"),
            domain("leaf", c.num_leaves * (2 if dual else 1), "switch", not dual, 0 if dual else c.servers_per_leaf,
                   "the NICs' other leaf carries on" if dual else f"stops the job; {c.servers_per_leaf} servers"),
            domain("spine", c.num_spine_switches, "switch", False, 0, "routed around"),
            domain("switch_cable", c.num_switch_cables, "switch_cable", False, 0, "routed around"),
            domain("software", c.num_gpus, "software", True, 0, "stops the job; restart")]
    if c.num_nvlink_trays:
        rows.insert(6, domain("nvlink_tray", c.num_nvlink_trays, "nvlink_tray", True, c.servers_per_domain,
                              f"stops its domain: {c.servers_per_domain} trays"))
    return rows


def servers_out_mean(domains: list[FailureDomain]) -> float:
    """Servers out of the job for repair at a random moment, on average."""
    return sum(d.failures_per_hour * d.servers_out * d.repair_h for d in domains if d.stops_job)


def short_probability(needed: int, spares: int | None, out_mean: float) -> float:
    """The chance a failure that needs `needed` servers finds fewer free spares (module doc); 0 without a
    limit (`spares` None) or when it needs none."""
    if spares is None or needed <= 0:
        return 0.0
    free_at_least = spares - needed  # the failure waits when more than this many are out
    if free_at_least < 0:
        return 1.0
    if out_mean <= 0:
        return 0.0
    log_m = math.log(out_mean)  # Poisson terms in logs: a large mean does not underflow
    cdf = math.fsum(math.exp(k * log_m - out_mean - math.lgamma(k + 1)) for k in range(free_at_least + 1))
    return min(1.0, max(0.0, 1.0 - cdf))


def spine_capacity_lost(domains: list[FailureDomain], spine_spare: float) -> float:
    """The average share of the spine tier's capacity down beyond what `spine_spare` covers: a failed spine
    (or spine cable) takes 1/count of its tier while it is out, and spare capacity of that share or more
    covers it."""
    lost = 0.0
    for d in domains:
        if d.kind in ("spine", "switch_cable") and d.count and 1 / d.count > spine_spare:
            lost += d.failures_per_hour * d.repair_h * (1 / d.count - spine_spare)  # expected number out x share
    return lost
