"""Component failure rates: what is derived from the Llama 3 run comes back as its table at its component-hours,
what is independent is not fitted to it, and the run's own rate lies between Meta's research clusters'."""

import math

import pytest

from fabriclab.whatif.goodput import rates
from fabriclab.whatif.goodput.rates import (KINDS, LLAMA3, LLAMA3_TABLE5, RSC1, RSC1_PER_NODE_DAY, RSC2,
                                            RSC2_PER_NODE_DAY, per_node_day, rate_table)


def test_table5_is_the_papers_counts():
    assert sum(c for _, _, c in LLAMA3_TABLE5) == 419  # the unexpected interruptions of the 54-day snapshot
    assert dict((name, c) for name, _, c in LLAMA3_TABLE5)["Faulty GPU"] == 148  # printed 30.1 %, 148/419 = 35.3 %
    assert LLAMA3.planned_per_day == pytest.approx(47 / 54)


def test_every_kind_has_a_rate_with_a_source_that_says_how_it_was_found():
    for table in (LLAMA3, RSC1, RSC2):
        assert set(table.rates) == set(KINDS)
        for r in table.rates.values():
            assert r.per_hour > 0 and r.repair_h >= 0
            assert r.source.split(":")[0] in ("derived", "independent", "assumed"), r.source


@pytest.mark.parametrize("kind,count,per", [("gpu", 196, 16384), ("hbm", 72, 16384), ("host", 46, 2048),
                                            ("nic", 7, 16384), ("software", 63, 16384)])
def test_derived_rates_give_back_table5_at_the_runs_component_hours(kind, count, per):
    assert LLAMA3.rate(kind).per_hour * per * 54 * 24 == pytest.approx(count)


def test_the_switch_rate_is_singh_et_als_and_the_cables_take_the_rest_of_the_network_row():
    assert 1 - math.exp(-LLAMA3.rate("switch").per_hour * 91.25 * 24) == pytest.approx(0.02)
    leaves = rates.LLAMA3_LEAVES * LLAMA3.rate("switch").per_hour * 54 * 24
    cables = LLAMA3.rate("host_cable").per_hour * 16384 * 54 * 24
    assert 0 < leaves < 35 and leaves + cables == pytest.approx(35)


def test_llama3s_rate_per_node_lies_between_metas_research_clusters():
    own = per_node_day(LLAMA3)
    assert RSC2_PER_NODE_DAY < own < RSC1_PER_NODE_DAY
    assert own == pytest.approx((419 - rates.LLAMA3_LEAVES * LLAMA3.rate("switch").per_hour * 54 * 24)
                                / (2048 * 54))  # every node part of Table 5 over the run's node-days


def test_the_scaled_tables_fail_at_their_clusters_rate_and_keep_the_switches():
    assert per_node_day(RSC1) == pytest.approx(RSC1_PER_NODE_DAY)
    assert per_node_day(RSC2) == pytest.approx(RSC2_PER_NODE_DAY)
    assert RSC1.rate("switch") == LLAMA3.rate("switch")
    gpu_share = LLAMA3.rate("gpu").per_hour / LLAMA3.rate("host").per_hour
    assert RSC1.rate("gpu").per_hour / RSC1.rate("host").per_hour == pytest.approx(gpu_share)


def test_an_unknown_table_is_refused_with_the_known_ones():
    assert rate_table(" RSC1 ") is RSC1
    with pytest.raises(ValueError, match="llama3, rsc1, rsc2"):
        rate_table("meta")
