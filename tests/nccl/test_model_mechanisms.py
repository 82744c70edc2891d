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


def test_tree_pipeline_fill_grows_with_depth_and_is_not_counted_twice():
    c = a100_hdr_prior()
    fill = {g: tree_fill_s(c, g, "LL128", [MB])[0] for g in (16, 32, 128)}
    assert 0 < fill[16] < fill[32] < fill[128]  # 1, 2, 4 network levels up and down
    assert tree_fill_s(c, 8, "LL128", [MB])[0] == 0  # one server: no tree
    assert tree_fill_s(c, 128, "Simple", [MB])[0] == 0  # already in NCCL's tree/Simple hop latency
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
