"""Goodput: the tokens per second a training job keeps once its cluster's failures are paid for.

`goodput(...)` puts the parts together for one job:

1. Unexpected interruptions: the failures per hour of every component that stops the job (`domains.py`:
   count x rate of `rates.py`); their mean time to failure M. Planned ones (a rate per job) come beside.
2. What each costs: the restart (`CheckpointPolicy.restart_s`: detection, rescheduling, start, NCCL), the
   checkpoint's read, the wait for a repair when no spare server stands in (the chance of that times the
   part's repair time, `domains.short_probability`), and the work since the last safe checkpoint (Daly's
   model, `checkpoint.ettr`); an asynchronous checkpoint adds its write's duration to the work lost.
3. The checkpoint interval: given, or Daly's optimum for the pause and M (`checkpoint.daly_interval`); an
   asynchronous checkpoint no more often than its write lasts; whole steps, at least one (a checkpoint is
   taken between steps).
4. The effective training time (Kokolis et al.'s effective training time ratio, Llama 3's "effective
   training time"): Daly's share of time that trains, less the planned interruptions' restarts, less what
   spine failures beyond the spare spine capacity slow the exposed network share of the step.

Goodput tokens/s = the step's tokens/s x the effective training time.

Try it: `fabriclab whatif llm --model llama3-405b --gpus 16384 --tp 8 --pp 16 --seq 8192 --gbs 2048
--recompute full` (its last lines).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fabriclab.fabric.resilience import ResilienceSpec
from fabriclab.whatif.goodput.checkpoint import Checkpoint, CheckpointPolicy, daly_interval, ettr
from fabriclab.whatif.goodput.domains import (Components, failure_domains, servers_out_mean, short_probability,
                                              spine_capacity_lost)

DAY_S = 86400.0


@dataclass(frozen=True, kw_only=True)
class Goodput:
    """A job's interruptions, checkpoints and the share of its time that trains."""

    rates: str
    """The rate table's name (`rates.TABLES`)."""
    domains: tuple = field(default=(), repr=False)
    """The job's FailureDomains."""
    unexpected_per_day: float
    """Failures a day that stop the job."""
    planned_per_day: float
    """Planned interruptions a day (no work lost)."""
    by_kind_per_day: dict = field(default_factory=dict)
    """Unexpected interruptions a day per kind of component."""
    mttf_s: float
    """Mean time between unexpected interruptions, seconds."""
    checkpoint: Checkpoint
    """The job's checkpoint: size, write, read, pause."""
    checkpoint_interval_s: float
    """Training seconds between checkpoints."""
    interval_rule: str
    """Where the interval comes from: `Daly 2006`, `given`, or `the write` (asynchronous, no sooner)."""
    restart_s: float
    """Mean time from an unexpected failure to training again: restart, read, wait for a repair."""
    wait_s: float
    """Of which the mean wait for a repaired part when no spare stands in."""
    spine_loss: float
    """Share of throughput lost to spine-tier failures beyond the spare spine capacity."""
    effective_training_time: float
    """Share of wall time that trains (module doc)."""
    step_tokens_per_s: float
    """The failure-free step's tokens/s."""

    @property
    def interruptions_per_day(self) -> float:
        return self.unexpected_per_day + self.planned_per_day

    @property
    def goodput_tokens_per_s(self) -> float:
        return self.step_tokens_per_s * self.effective_training_time

    def record(self) -> dict:
        """The fields a run's record keeps."""
        c = self.checkpoint
        return {"interruptions_per_day": self.interruptions_per_day, "unexpected_per_day": self.unexpected_per_day,
                "planned_per_day": self.planned_per_day, "interruptions_by_kind_per_day": self.by_kind_per_day,
                "mttf_s": self.mttf_s, "checkpoint_interval_s": self.checkpoint_interval_s,
                "checkpoint_interval_rule": self.interval_rule, "checkpoint_bytes": c.total_bytes,
                "checkpoint_write_s": c.write_s, "checkpoint_pause_s": c.pause_s, "checkpoint_read_s": c.read_s,
                "restart_s": self.restart_s, "repair_wait_s": self.wait_s, "spine_loss": self.spine_loss,
                "effective_training_time": self.effective_training_time,
                "goodput_tokens_per_s": self.goodput_tokens_per_s, "failure_rates": self.rates}


def goodput(*, components: Components, rates, resilience: ResilienceSpec, checkpoint: Checkpoint,
            policy: CheckpointPolicy, tokens_per_s: float, step_s: float = 0.0,
            network_share: float = 0.0) -> Goodput:
    """The goodput of a job of `components` whose failure-free step of `step_s` seconds runs at
    `tokens_per_s` (module doc; `step_s` 0: the interval is not rounded to steps); `network_share`: the share
    of its step that is exposed communication between servers."""
    domains = failure_domains(components, rates, resilience)
    stopping = [d for d in domains if d.stops_job]
    per_hour = sum(d.failures_per_hour for d in stopping)
    mttf_s = 3600.0 / per_hour
    out_mean = servers_out_mean(domains)
    wait_h = sum(d.failures_per_hour * d.repair_h * short_probability(d.servers_out, resilience.spare_servers,
                                                                       out_mean) for d in stopping) / per_hour
    restart_s = policy.restart_s + checkpoint.read_s + wait_h * 3600.0
    interval, rule = _interval(policy, checkpoint, mttf_s, step_s)
    share = ettr(interval, checkpoint.pause_s, restart_s + checkpoint.lag_s, mttf_s)
    planned_per_day = rates.planned_per_day
    planned = planned_per_day / DAY_S * (policy.restart_s + checkpoint.read_s + checkpoint.pause_s)
    spine = spine_capacity_lost(domains, resilience.spine_spare) * network_share
    by_kind: dict = {}
    for d in stopping:
        by_kind[d.kind] = by_kind.get(d.kind, 0.0) + d.failures_per_hour * 24
    return Goodput(rates=rates.name, domains=tuple(domains), unexpected_per_day=per_hour * 24,
                   planned_per_day=planned_per_day, by_kind_per_day=by_kind, mttf_s=mttf_s, checkpoint=checkpoint,
                   checkpoint_interval_s=interval, interval_rule=rule, restart_s=restart_s, wait_s=wait_h * 3600.0,
                   spine_loss=spine, effective_training_time=max(0.0, share * (1 - planned) * (1 - spine)),
                   step_tokens_per_s=tokens_per_s)


def _interval(policy: CheckpointPolicy, checkpoint: Checkpoint, mttf_s: float, step_s: float) -> tuple[float, str]:
    """The training time between checkpoints, in whole steps, and where it comes from."""
    if policy.interval_s is not None:
        interval, rule = policy.interval_s, "given"
    else:
        interval, rule = daly_interval(checkpoint.pause_s, mttf_s), "Daly 2006"
    if checkpoint.lag_s > interval:  # an asynchronous write must end before the next checkpoint starts
        interval, rule = checkpoint.lag_s, "the write (asynchronous: no sooner)"
    if step_s > 0:
        steps = max(1, round(interval / step_s), math.ceil(checkpoint.lag_s / step_s))
        interval = steps * step_s
    return interval, rule
