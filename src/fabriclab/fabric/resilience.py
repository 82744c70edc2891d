"""What the fabric buys against failures: dual top-of-rack switches, spare spine capacity, spare servers.

A synchronous training job stops when one of its GPUs, servers, NICs or the leaf a NIC hangs on fails
(`whatif/goodput/domains.py` says what each failure stops and how long the job waits). Three design
choices change that, and a cluster file holds them as its `resilience` section (left out while they are
the defaults below):

* `dual_tor`: each NIC has two ports on two leaf switches, as in Alibaba's HPN (Qian et al., "Alibaba HPN:
  A Data Center Network for Large Language Model Training", SIGCOMM 2024), which does it because "a
  single ToR failure" stops a synchronous job: a failed leaf or NIC-leaf cable leaves every NIC running on
  its other port. It doubles the leaves and the NIC-leaf cables (`plan/llm/goodput.py` prices them).
* `spine_spare`: spine capacity beyond the bisection, as a share (0.125: one spine in eight more, the
  headroom Meta is said to keep to ride through spine failures). A failed spine or spine-to-leaf cable is
  routed around; what the spare capacity does not cover slows the job until the repair.
* `spare_servers`: servers kept idle to stand in for failed ones. Without a free one the job waits for the
  repair. None: the job runs on part of a larger cluster whose idle servers stand in (as Llama 3 405B's
  16,384 GPUs did on one of Meta's 24,576-GPU clusters), so it never waits; `plan --rank goodput` then
  buys as many as pay for themselves. On NVLink domains that span trays (an NVL72 rack) a job whose
  groups span the domain needs a whole spare domain's trays, unless the trays it leaves free in each
  domain (64 of 72 GPUs used) stand in.

Try it: `python -c "from fabriclab.fabric.resilience import ResilienceSpec; print(ResilienceSpec())"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class ResilienceSpec:
    """The fabric's answers to failures (module doc)."""

    dual_tor: bool = False
    """Each NIC's two ports on two leaves (Alibaba HPN): a leaf or NIC-leaf cable failure does not stop a job."""
    spine_spare: float = 0.0
    """Spine capacity beyond the bisection, a share in [0, 1]: a failed spine within it costs no speed."""
    spare_servers: int | None = None
    """Idle servers (trays) that stand in for failed ones; None: a larger cluster's idle servers do."""


def check_resilience(resilience: ResilienceSpec, where: str) -> None:
    """ValueError naming the field when a value is out of range."""
    r = resilience
    if not isinstance(r.dual_tor, bool):
        raise ValueError(f"cluster file {where}: resilience.dual_tor is {r.dual_tor!r}; give true or false")
    s = r.spine_spare
    if not isinstance(s, (int, float)) or isinstance(s, bool) or not math.isfinite(s) or not 0 <= s <= 1:
        raise ValueError(f"cluster file {where}: resilience.spine_spare is {s!r}; give the spare spine capacity as "
                         f"a share in [0, 1], e.g. 0.125")
    n = r.spare_servers
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
        raise ValueError(f"cluster file {where}: resilience.spare_servers is {n!r}; give a whole number of spare "
                         f"servers >= 0, or null when a larger cluster's idle servers stand in")
