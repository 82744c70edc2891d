"""Failure domains: what a failed leaf, cable, server or NVLink tray takes from a job (dual ToR, rail-optimised
against plain trees, rack-scale domains with and without free trays), the spares' chance of running short,
and what spine failures cost beyond the spare spine capacity."""

import math

import pytest

from fabriclab.fabric.resilience import ResilienceSpec
from fabriclab.whatif.goodput.checkpoint import Checkpoint, CheckpointPolicy
from fabriclab.whatif.goodput.domains import (Components, failure_domains, servers_out_mean, short_probability,
                                              spine_capacity_lost)
from fabriclab.whatif.goodput.goodput import goodput
from fabriclab.whatif.goodput.rates import LLAMA3

JOB = Components(num_gpus=16384, num_servers=2048, num_nics=16384, num_leaves=512, num_spine_switches=768,
                 num_switch_cables=32768, servers_per_leaf=32)


def _by_kind(components, resilience=ResilienceSpec()):
    return {d.kind: d for d in failure_domains(components, LLAMA3, resilience)}


def test_a_leaf_or_a_nic_cable_stops_the_job_unless_each_nic_has_a_second_tor():
    single, dual = _by_kind(JOB), _by_kind(JOB, ResilienceSpec(dual_tor=True))
    assert single["leaf"].stops_job and single["host_cable"].stops_job
    assert not dual["leaf"].stops_job and not dual["host_cable"].stops_job
    assert dual["leaf"].count == 2 * single["leaf"].count  # twice the leaves, each of which may fail
    assert dual["nic"].stops_job and dual["gpu"].stops_job  # the NIC itself stays a single point


def test_spines_and_their_cables_are_routed_around():
    d = _by_kind(JOB)
    assert not d["spine"].stops_job and not d["switch_cable"].stops_job


def test_a_rail_leaf_takes_one_nic_of_each_of_its_servers_a_plain_leaf_whole_servers():
    rail = _by_kind(JOB)["leaf"]
    plain = _by_kind(Components(**{**JOB.__dict__, "servers_per_leaf": 4}))["leaf"]
    assert rail.servers_out == 32 and plain.servers_out == 4
    assert servers_out_mean([rail]) == pytest.approx(8 * servers_out_mean([plain]))


def test_a_rack_scale_domain_is_one_failure_domain_when_the_job_spans_it_and_has_no_free_tray():
    rack = dict(num_gpus=18432, num_servers=4608, num_nics=18432, num_leaves=576, num_spine_switches=864,
                num_switch_cables=36864, servers_per_leaf=32, num_nvlink_trays=2304, servers_per_domain=18)
    whole = _by_kind(Components(**rack, spans_domain=True))
    spare = _by_kind(Components(**rack, spans_domain=True, domain_has_spare_trays=True))
    alone = _by_kind(Components(**rack, spans_domain=False))
    assert whole["gpu"].servers_out == 18 and spare["gpu"].servers_out == 0 and alone["gpu"].servers_out == 1
    assert whole["nvlink_tray"].stops_job and whole["nvlink_tray"].servers_out == 18
    assert "nvlink_tray" not in _by_kind(JOB)


def test_the_chance_of_running_short_of_spares_is_a_poisson_tail():
    assert short_probability(1, None, 50.0) == 0.0  # a larger cluster's idle servers: never short
    assert short_probability(0, 0, 50.0) == 0.0  # nothing to replace
    assert short_probability(32, 16, 1.0) == 1.0  # fewer spares than the failure takes
    m, k, n = 3.0, 5, 1
    tail = 1 - sum(math.exp(-m) * m ** i / math.factorial(i) for i in range(k - n + 1))
    assert short_probability(n, k, m) == pytest.approx(tail)
    chances = [short_probability(1, k, 30.0) for k in (10, 30, 60, 120)]
    assert chances == sorted(chances, reverse=True) and chances[-1] < 1e-9
    assert 0 < short_probability(1, 2000, 1500.0) < 1  # a large mean does not underflow


def test_spare_spine_capacity_covers_a_failed_spine():
    domains = failure_domains(JOB, LLAMA3, ResilienceSpec())
    assert spine_capacity_lost(domains, 0.0) > 0
    assert spine_capacity_lost(domains, 1 / 768) == 0.0


def _goodput(components, resilience, **kwargs):
    ckpt = Checkpoint(total_bytes=5.7e12, shard_bytes=3.5e8, write_s=2.84, read_s=2.84, pause_s=2.84, lag_s=0.0,
                      bound="storage total")
    return goodput(components=components, rates=LLAMA3, resilience=resilience, checkpoint=ckpt,
                   policy=CheckpointPolicy(**kwargs), tokens_per_s=1e6, step_s=13.0)


def test_dual_tor_removes_the_network_interruptions_and_spares_the_waits():
    single, dual = _goodput(JOB, ResilienceSpec()), _goodput(JOB, ResilienceSpec(dual_tor=True))
    network = single.by_kind_per_day["leaf"] + single.by_kind_per_day["host_cable"]
    assert single.unexpected_per_day - dual.unexpected_per_day == pytest.approx(network)
    assert dual.effective_training_time > single.effective_training_time
    none, few, enough = (_goodput(JOB, ResilienceSpec(spare_servers=k)) for k in (0, 32, 256))
    assert none.wait_s > few.wait_s > enough.wait_s >= 0 and enough.wait_s < 1
    assert none.effective_training_time < few.effective_training_time < enough.effective_training_time
    assert enough.effective_training_time == pytest.approx(single.effective_training_time, rel=1e-6)


def test_the_interval_is_whole_steps_and_an_asynchronous_write_must_end_first():
    g = _goodput(JOB, ResilienceSpec())
    assert g.interval_rule == "Daly 2006" and g.checkpoint_interval_s / 13.0 == round(g.checkpoint_interval_s / 13.0)
    given = _goodput(JOB, ResilienceSpec(), interval_s=3600.0)
    assert given.interval_rule == "given" and abs(given.checkpoint_interval_s - 3600.0) <= 6.5
    assert given.effective_training_time < g.effective_training_time  # Daly's beats an hour here
    ckpt = Checkpoint(total_bytes=5.7e12, shard_bytes=3.5e8, write_s=100.0, read_s=100.0, pause_s=0.01, lag_s=100.0,
                      bound="per server")
    late = goodput(components=JOB, rates=LLAMA3, resilience=ResilienceSpec(), checkpoint=ckpt,
                   policy=CheckpointPolicy(asynchronous=True), tokens_per_s=1e6, step_s=13.0)
    assert late.interval_rule.startswith("the write") and late.checkpoint_interval_s == 8 * 13.0  # >= 100 s
