"""Runs on part of each server (nccl-tests under `mpirun -N 2` on servers of 8 GPUs), and the few channels
NCCL gives a point-to-point peer on another server (sendrecv runs under the NIC's rate)."""

from dataclasses import replace

import pytest

from fabriclab.fabric.cluster import from_dict, to_dict
from fabriclab.fabric.links import link_preset
from fabriclab.fabric.presets import cluster_preset
from fabriclab.nccl.calibration import CalibrationRequest, calibrate_cluster
from fabriclab.nccl.layout import layout, on_servers
from fabriclab.nccl.log_writer import format_nccl_tests
from fabriclab.nccl.logs import parse_nccl_tests
from fabriclab.nccl.predict import collective_times, predict_nccl_table, prediction_run
from fabriclab.nccl.versions import p2p_net_channels

MB = 1 << 20


def _h100(version="2.29.2", p2p=None):
    c = cluster_preset("dgx-h100")
    return replace(c, library=replace(c.library, nccl_version=version, p2p_channel_bandwidth_Bps=p2p))


def test_a_run_on_part_of_each_server_sees_servers_of_its_gpus_with_their_nics():
    c = _h100()
    assert (c.server.gpus_per_server, c.server.nics_per_server, c.library.num_channels) == (8, 8, 16)
    two = on_servers(c, 20, 10)
    assert (two.server.gpus_per_server, two.server.nics_per_server, two.library.num_channels) == (2, 2, 4)
    assert layout(two, 20).num_servers == 10
    # whole servers, one server, or a cluster of fewer NICs than GPUs (rounded up: a GPU keeps a NIC)
    assert on_servers(c, 80, 10) is c and on_servers(c, 4, 1) is c
    half = replace(c, server=replace(c.server, nics_per_server=4))
    assert on_servers(half, 10, 10).server.nics_per_server == 1
    with pytest.raises(ValueError, match="same number of GPUs on every server, at most 8"):
        on_servers(c, 30, 4)
    with pytest.raises(ValueError, match="at most 8"):
        on_servers(c, 90, 10)


@pytest.mark.parametrize(("version", "ranks", "nodes", "channels", "expected"), [
    ("2.11.4", 2, 2, 16, 1),     # one channel per remote peer up to 2.11
    ("2.18.3", 80, 10, 16, 2),   # NCCL_NCHANNELS_PER_NET_PEER's 2
    ("2.26.2", 2, 2, 16, 2),     # 2.20-2.28: two ...
    ("2.26.2", 80, 10, 16, 1),   # ... halved while 2 x ranks > 4 x p2pnChannels
    ("2.29.2", 2, 2, 16, 4),     # 2.29: the NIC's 50 GB/s at 14 GB/s a channel
    ("2.29.2", 2, 2, 2, 2),      # ... halved on several servers while 4 x ceil(ranks / 8) > p2pnChannels
    ("2.29.2", 10, 10, 2, 1),
    ("2.29.2", 40, 10, 8, 1),
    ("2.29.2", 4, 1, 16, 4),     # one server: at most p2pnChannels, no halving
])
def test_nccl_gives_a_remote_peer_the_channels_its_release_says(version, ranks, nodes, channels, expected):
    assert p2p_net_channels(version, ranks, nodes, channels, 1, 50.0) == expected


def _log(cluster, gpus, servers, collective):
    seen = on_servers(cluster, gpus, servers)
    rows = predict_nccl_table(seen, gpus, [1 << k for k in range(20, 31, 2)], collective)
    text = format_nccl_tests(replace(prediction_run(seen, gpus, rows, collective), nccl_version="2.29.2"))
    (run,) = parse_nccl_tests(text, source=f"{collective}_{gpus}.log")
    return run


def test_partial_server_runs_calibrate_and_a_ring_shift_runs_on_one_channel():
    truth = _h100(p2p=20e9)
    # the ring shift over ten servers runs on one channel: 20 GB/s where the NIC moves 50
    t, _ = collective_times(on_servers(truth, 10, 10), 10, [1 << 30], "sendrecv")
    assert (1 << 30) / t[0] / 1e9 == pytest.approx(20, rel=0.02)
    runs = (_log(truth, 8, 1, "allreduce"), _log(truth, 10, 10, "allreduce"), _log(truth, 10, 10, "sendrecv"))
    held = (_log(truth, 40, 10, "allreduce"), _log(truth, 40, 10, "sendrecv"))
    cal = calibrate_cluster(CalibrationRequest(runs=runs, held=held, nic=link_preset("NDR"), gpus_per_server=8,
                                               name="t", log_names=("synthetic",)))
    assert cal.cluster.server.gpus_per_server == 8  # the file describes the whole server
    assert cal.cluster.library.p2p_channel_bandwidth_Bps == pytest.approx(20e9, rel=0.05)
    held_rows = [r for r in cal.residuals if r.held_out]
    assert {(r.num_gpus, r.collective) for r in held_rows} == {(40, "allreduce"), (40, "sendrecv")}
    assert max(abs(r.error_pct) for r in held_rows) < 5
    # four GPUs of each server move four NICs' worth; their ring shift stays on one channel
    big = {r.collective: r.measured_busbw_GBps for r in held_rows if r.size_bytes == 1 << 30}
    assert big["sendrecv"] == pytest.approx(20, rel=0.05) and big["allreduce"] > 3 * big["sendrecv"]
    # the rate is part of the cluster file, and left out of it when unknown
    rate = cal.cluster.library.p2p_channel_bandwidth_Bps
    assert from_dict(to_dict(cal.cluster)).library.p2p_channel_bandwidth_Bps == rate
    assert "p2p_channel_bandwidth_Bps" not in to_dict(_h100())["library"]


def test_without_a_known_rate_a_sendrecv_runs_at_the_nic():
    c = _h100()
    t, _ = collective_times(on_servers(c, 10, 10), 10, [1 << 30], "sendrecv")
    nic = c.server.nic_bandwidth_Bps * c.server.nic_efficiency / 1e9
    assert (1 << 30) / t[0] / 1e9 == pytest.approx(nic, rel=0.05)


def test_runs_of_several_gpus_per_server_need_the_servers_size():
    truth = _h100()
    runs = (_log(truth, 10, 10, "allreduce"), _log(truth, 40, 10, "allreduce"))
    with pytest.raises(ValueError, match=r"run \[1, 4\] GPUs of each server: .* give --gpus-per-server"):
        calibrate_cluster(CalibrationRequest(runs=runs, nic=link_preset("NDR"), name="t"))
