"""Predictions of a cluster model: the simulated link time against closed forms, NCCL's choices, layouts."""

import pytest

from fabriclab.fabric.cluster import a100_hdr_prior, prior_cluster, with_server
from fabriclab.fabric.links import link_preset
from fabriclab.nccl.layout import layout
from fabriclab.nccl.links import link_seconds_per_byte
from fabriclab.nccl.predict import collective_times, predict_nccl_table
from fabriclab.nccl.choice import nccl_choices


def test_ring_link_time_is_the_closed_form():
    model = a100_hdr_prior()
    s = model.server
    for n in (2, 4, 8):  # one server: every GPU's NVLink carries the bus bytes
        assert link_seconds_per_byte(model, n, "ring", "allreduce") == pytest.approx(
            2 * (n - 1) / n / s.intra_bandwidth_Bps, rel=1e-6)
    nic_bound = s.nics_per_server * s.nic_bandwidth_Bps * s.nic_efficiency  # 8 NICs, non-blocking rail
    for n in (16, 64):
        assert link_seconds_per_byte(model, n, "ring", "allreduce") == pytest.approx(
            2 * (n - 1) / n / min(s.intra_bandwidth_Bps, nic_bound), rel=1e-6)
    half = with_server(model, nic_efficiency=0.5)
    assert link_seconds_per_byte(half, 16, "ring", "allreduce") == pytest.approx(
        2 * 15 / 16 / (nic_bound / s.nic_efficiency * 0.5), rel=1e-6)


def test_oversubscribed_plain_fat_tree_is_slower_than_rails():
    from dataclasses import replace

    rail = a100_hdr_prior()
    plain = replace(rail, network=replace(rail.network, fabric="fat-tree", leaf_ports=16, bisection=0.25))
    t_rail = link_seconds_per_byte(rail, 64, "ring", "allreduce")
    t_plain = link_seconds_per_byte(plain, 64, "ring", "allreduce")
    assert t_plain > 1.5 * t_rail


def test_layout_needs_whole_servers():
    model = a100_hdr_prior()
    assert (layout(model, 4).num_servers, layout(model, 32).num_servers) == (1, 4)
    with pytest.raises(ValueError, match="12 GPUs do not fill whole servers of 8 GPUs: use a multiple of 8"):
        layout(model, 12)


def test_nccl_choices_follow_its_model():
    model = a100_hdr_prior()
    sizes = [1 << 10, 1 << 20, 16 << 20, 1 << 30]
    # one server: LL for small, LL128 in the middle, Simple for large (NCCL 2.9's constants)
    assert nccl_choices(model, 8, sizes) == [("ring", "LL"), ("ring", "LL"), ("ring", "LL128"), ("ring", "Simple")]
    # across servers trees take the small sizes
    assert nccl_choices(model, 128, sizes)[0] == ("tree", "LL")
    pcie = prior_cluster(gpus_per_server=2, intra="pcie", nic=link_preset("25GbE"), nics_per_server=1)
    assert all(proto != "LL128" for _, proto in nccl_choices(pcie, 8, sizes))  # LL128 needs NVLink


def test_time_grows_with_size_and_launches_add_up():
    model = a100_hdr_prior()
    t, picks = collective_times(model, 8, [8, 1 << 30])
    assert t[1] > 100 * t[0] and picks[0] == "ring/LL"
    one, _ = collective_times(model, 8, [8], gpus_per_process=8)
    assert one[0] == pytest.approx(8 * model.library.launch_s + model.library.host_overhead_s)


def test_table_columns():
    rows = predict_nccl_table(a100_hdr_prior(), 16, [1 << 20, 1 << 30])
    assert set(rows[0]) >= {"size_bytes", "count", "dtype", "redop", "root", "time_us", "algbw_GBps", "busbw_GBps",
                            "inplace_time_us", "inplace_algbw_GBps", "inplace_busbw_GBps", "algorithm"}
    assert rows[1]["busbw_GBps"] == pytest.approx(rows[1]["algbw_GBps"] * 2 * 15 / 16)
    assert rows[0]["count"] == (1 << 20) // 4
    one = predict_nccl_table(a100_hdr_prior(), 1, [1 << 20])[0]
    assert one["busbw_GBps"] == 0 and one["inplace_time_us"] < one["time_us"]
    with pytest.raises(ValueError):
        predict_nccl_table(a100_hdr_prior(), 16, [])
