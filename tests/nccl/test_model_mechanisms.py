"""The NCCL cost model's mechanisms: channels at a size, a tree's pipeline, point-to-point on the flow
simulator, the version of the logs, several collectives in one fit, ranges beyond the fit, coverage."""

from dataclasses import replace

import numpy as np
import pytest

from fabriclab.fabric.cluster import a100_hdr_prior, with_server
from fabriclab.fabric.links import link_preset
from fabriclab.fabric.presets import cluster_preset
from fabriclab.nccl.band import row_bands
from fabriclab.nccl.calibration import CalibrationRequest, calibrate_cluster
from fabriclab.nccl.log_writer import format_nccl_tests
from fabriclab.nccl.logs import parse_nccl_tests
from fabriclab.nccl.pipeline import active_channels, tree_fill_s
from fabriclab.nccl.predict import collective_times, predict_nccl_table, prediction_run

MB = 1 << 20


def test_nccl_runs_fewer_channels_on_small_buffers():
    c = a100_hdr_prior()
    ch = active_channels(c, 128, "tree", "LL128", [1 << 10, 64 << 10, 16 * MB])
    assert ch[0] == 1 and 1 < ch[1] < c.library.num_channels and ch[2] == c.library.num_channels


def test_tree_pipeline_fill_grows_with_depth():
    c = a100_hdr_prior()
    fill = {g: tree_fill_s(c, g, "LL128", [MB])[0] for g in (16, 32, 64, 128)}
    assert 0 < fill[16] < fill[32] < fill[64] < fill[128]  # 1, 2, 3, 4 network levels up and down
    # a level more adds a hop up and a hop down, each moving two children's chunks through one NIC share
    assert fill[128] - fill[64] == pytest.approx(fill[64] - fill[32], rel=1e-9)
    assert tree_fill_s(c, 8, "LL128", [MB])[0] == 0  # one server: no tree
    # Simple fills too: with the channel's share of the buffer up to a chunk (an eighth of NCCL_BUFFSIZE),
    # then no more; a buffer twice as large moves the plateau to twice the size
    # (NCCL 2.20 on: no halving of Simple's tree chunk)
    c21 = replace(c, library=replace(c.library, nccl_version="2.21.5"))
    simple = tree_fill_s(c21, 16, "Simple", [64 << 10, MB, 8 * MB, 16 * MB, 64 * MB])
    assert 0 < simple[0] < simple[1] < simple[2] == simple[3] == simple[4]
    big = replace(c21, library=replace(c21.library, nccl_env={"NCCL_BUFFSIZE": str(8 * MB)}))
    doubled = tree_fill_s(big, 16, "Simple", [8 * MB, 16 * MB, 64 * MB])
    assert doubled[0] == pytest.approx(simple[2]) and doubled[1] == doubled[2] == pytest.approx(2 * simple[2])
    # the fill is part of the tree's time: without it the tree would be faster by exactly that much
    times, picks = collective_times(c, 128, [MB])
    assert picks == ["tree/LL128"] and times[0] > fill[128]


def test_alltoall_loads_the_bisection_a_ring_does_not():
    base = replace(cluster_preset("dgx-h100"), network=replace(cluster_preset("dgx-h100").network,
                                                                fabric="fat-tree", leaf_ports=16))
    thin = replace(base, network=replace(base.network, bisection=0.25))
    a2a_full, _ = collective_times(base, 64, [256 * MB], "alltoall")
    a2a_thin, _ = collective_times(thin, 64, [256 * MB], "alltoall")
    assert a2a_thin[0] > 2 * a2a_full[0]
    rail = cluster_preset("dgx-h100")  # rail-optimised with PXN: all-to-all stays on its rail, NIC-bound
    t, pick = collective_times(rail, 64, [256 * MB], "alltoall")
    nic = rail.server.nic_bandwidth_Bps * rail.server.nic_efficiency
    assert pick == ["p2p/Simple"] and t[0] == pytest.approx(256 * MB * 56 / 64 / nic, rel=0.05)


def _log(cluster, gpus, collective, version="2.18.3"):
    rows = predict_nccl_table(cluster, gpus, [1 << k for k in range(12, 31, 2)], collective)
    text = format_nccl_tests(replace(prediction_run(cluster, gpus, rows, collective), nccl_version=version))
    (run,) = parse_nccl_tests(text, source=f"{collective}_{gpus}.log")
    return run


def test_one_cluster_file_from_several_collectives_recovers_the_truth():
    truth = with_server(replace(a100_hdr_prior(), library=replace(a100_hdr_prior().library,
                                                                   nccl_version="2.18.3")), nic_efficiency=0.8)
    runs = tuple(_log(truth, g, coll) for g in (8, 16) for coll in ("allreduce", "allgather", "reduce_scatter"))
    held = (_log(truth, 32, "alltoall"), _log(truth, 32, "allreduce"))
    cal = calibrate_cluster(CalibrationRequest(runs=runs, held=held, nic=link_preset("HDR"), name="t",
                                               log_names=("synthetic",)))
    assert cal.cluster.library.nccl_version == "2.18.3" and "from the logs" in cal.version_note
    assert {r.collective for r in cal.residuals if not r.held_out} == {"allreduce", "allgather", "reduce_scatter"}
    assert cal.cluster.server.nic_efficiency == pytest.approx(0.8, rel=0.05)
    held_rows = [r for r in cal.residuals if r.held_out]
    assert {r.collective for r in held_rows} == {"alltoall", "allreduce"}
    assert max(abs(r.error_pct) for r in held_rows if r.size_bytes >= 64 * MB) < 5
    assert cal.coverage and cal.coverage[-1]["rows"] == len(held_rows)


def test_logs_of_another_version_than_given_are_refused():
    truth = replace(a100_hdr_prior(), library=replace(a100_hdr_prior().library, nccl_version="2.18.3"))
    request = CalibrationRequest(runs=(_log(truth, 16, "allreduce"),), nic=link_preset("HDR"), nccl_version="2.21.5")
    with pytest.raises(ValueError, match=r"--nccl-version 2\.21\.5: the logs say NCCL 2\.18\.3"):
        calibrate_cluster(request)


def test_a_row_deeper_than_any_fitted_row_gets_a_wider_range():
    truth = replace(a100_hdr_prior(), library=replace(a100_hdr_prior().library, nccl_version="2.18.3"))
    cal = calibrate_cluster(CalibrationRequest(runs=tuple(_log(truth, g, "allreduce") for g in (8, 16)),
                                               nic=link_preset("HDR"), name="t"))
    sizes = [4 << 10, 16 << 10]
    widths = {}
    for gpus in (16, 128):
        rows = predict_nccl_table(cal.cluster, gpus, sizes)
        bands = row_bands(cal.cluster, gpus, rows)
        widths[gpus] = [b.busbw_high_GBps / b.busbw_low_GBps for b in bands]
        if gpus == 128:
            assert all(any("beyond the fit" in n for n in b.prior_parameters) for b in bands)
    assert np.all(np.array(widths[128]) > np.array(widths[16]))


def test_ll_holds_a_step_back_at_every_network_hop():
    """Across the network LL is store and forward (NCCL's proxy sends a step once every line has its
    flag): one more tree level adds, up and down, the step written by the GPU and moved over the NIC."""
    from fabriclab.nccl.library import resolved
    from fabriclab.nccl.pipeline import _hop_rates

    c = resolved(a100_hdr_prior())  # a calibrated file: the GPU writes LL at its fitted per-byte cost
    size = [64 << 10]
    ch = active_channels(c, 128, "tree", "LL", size)
    assert (ch == active_channels(c, 64, "tree", "LL", size)).all()
    unit = size[0] / ch[0]
    _, net_ch = _hop_rates(c, "LL", ch)
    hop = 2 * unit / net_ch[0] + unit * c.library.protocols["LL"].per_byte_s  # two children share the NIC
    added = tree_fill_s(c, 128, "LL", size)[0] - tree_fill_s(c, 64, "LL", size)[0]
    assert added == pytest.approx(2 * hop, rel=1e-9)
    # a GPU that writes LL lines twice as slowly holds each step back twice as long
    ll = c.library.protocols["LL"]
    slow = replace(c, library=replace(c.library, protocols={**c.library.protocols,
                                                            "LL": replace(ll, per_byte_s=2 * ll.per_byte_s)}))
    assert tree_fill_s(slow, 128, "LL", size)[0] > tree_fill_s(c, 128, "LL", size)[0] + 4 * unit * ll.per_byte_s


def test_a_network_hop_costs_every_protocol_what_the_network_adds():
    from fabriclab.nccl.fit import Param, carry_network_hop

    names = ["tree.LL.net_step_s", "tree.LL128.net_step_s", "tree.Simple.net_step_s", "ring.LL.net_step_s",
             "ring.Simple.net_step_s", "tree.LL128.base_s"]
    priors = [5e-6, 8.5e-6, 28e-6, 2.7e-6, 4e-6, 4.4e-6]
    params = [Param(name=f"library.latencies.{n}", prior=p, lower=p / 100, upper=p * 100)
              for n, p in zip(names, priors)]
    values = np.array([10e-6, 8.5e-6, 28e-6, 0.3e-6, 4e-6, 4.4e-6])
    active = np.array([True, False, False, True, False, False])
    out = carry_network_hop(params, values, active)
    assert out[0] == values[0] and out[3] == values[3]  # fitted ones stay
    assert out[1] == pytest.approx(13.5e-6) and out[2] == pytest.approx(33e-6)  # + the tree's 5 us
    assert out[4] == pytest.approx(2e-6)  # the ring's hop is 2.4 us faster, but at least half NCCL's 4 us
    assert out[5] == values[5]  # not a network step


def test_calibrated_trees_pay_the_fitted_network_hop_with_ll128():
    from pathlib import Path

    from fabriclab.nccl.logs import read_runs

    logs = Path(__file__).resolve().parents[2] / "examples" / "nccl-tests-a100"
    runs = tuple(r for g in (2, 4, 8, 16) for r in read_runs(logs / f"nccl_{g}.log"))
    result = calibrate_cluster(CalibrationRequest(runs=runs, nic=link_preset("hdr")))
    fit = result.cluster.fit["parameters"]
    ll, ll128 = fit["library.latencies.tree.LL.net_step_s"], fit["library.latencies.tree.LL128.net_step_s"]
    assert ll["fitted"] and not ll128["fitted"]
    assert ll128["value"] == pytest.approx(ll128["prior"] + ll["value"] - ll["prior"], rel=1e-9)
    assert ll["value"] > 1.5 * ll["prior"]  # this network's hop is slower than NCCL's constant


def test_sharp_in_the_cluster_file_lets_nccl_run_collnet(tmp_path):
    import json

    from fabriclab.fabric.cluster import load_cluster, save_cluster

    sizes = [1 << k for k in range(10, 31, 2)]
    # A100: CollNet; H100: NVLS across servers, which NCCL runs only over SHARP too
    for preset, algorithm in (("dgx-a100", "collnet"), ("dgx-h100", "nvls")):
        plain = cluster_preset(preset)
        sharp = replace(plain, network=replace(plain.network, sharp=True))
        _, picks_plain = collective_times(plain, 128, sizes)
        _, picks_sharp = collective_times(sharp, 128, sizes)
        assert not any(p.startswith(("collnet", "nvls")) for p in picks_plain)
        assert any(p.startswith(algorithm) for p in picks_sharp)
    save_cluster(sharp, tmp_path / "c.json")
    assert load_cluster(tmp_path / "c.json").network.sharp is True
    data = json.loads((tmp_path / "c.json").read_text())
    data["network"]["sharp"] = "yes"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="network.sharp is 'yes'; give true or false"):
        load_cluster(tmp_path / "bad.json")
