"""Calibration on the shared A100 logs: residuals of the fit, and predictions of rows the fit never saw.

The issue's goal: busbw within 10 % for sizes >= 64 MB and within 25 % for 1-16 MB on held-out rows."""

from pathlib import Path

import pytest

from fabriclab.fabric.cluster import a100_hdr_prior
from fabriclab.nccl.logs import read_runs
from fabriclab.nccl.predict import predict_nccl_table
from fabriclab.nccl.fit import calibrate, check, summary

LOGS = Path(__file__).resolve().parents[2] / "examples" / "nccl-tests-a100"
pytestmark = pytest.mark.skipif(not LOGS.is_dir(), reason=f"shared nccl-tests logs not at {LOGS}")


@pytest.fixture(scope="module")
def runs():
    return {n: read_runs(LOGS / f"nccl_{n}.log")[0] for n in (1, 2, 4, 8, 16)}


@pytest.fixture(scope="module")
def fit_all(runs):
    """The fit on every log (two tests read it: fitted once)."""
    return calibrate(list(runs.values()), a100_hdr_prior())


# NCCL 2.9's model runs ring/LL at 512 KB on 2 GPUs; the log's curve jumps to LL128's one size earlier
# (a choice, not a cost: the row is 40 % off whatever the fit does), so that band is not a goal there.
KNOWN_CHOICE_MISS = {(2, "64-512 KB")}


def _goals_met(rows):
    table = summary(rows)
    assert table, "no rows in the goal's size bands"
    return {(s["num_gpus"], s["band"]): round(s["max_abs_error_pct"], 1) for s in table
            if not s["within_goal"] and (s["num_gpus"], s["band"]) not in KNOWN_CHOICE_MISS}


def test_fit_on_every_log(fit_all):
    result = fit_all
    assert _goals_met(result.residuals) == {}
    assert all(not r.held_out for r in result.residuals)
    assert {r.num_gpus for r in result.residuals} == {2, 4, 8, 16}  # 1 rank moves nothing: not fitted
    params = {p.name: p for p in result.params}
    assert params["server.nic_efficiency"].determined and 0.5 < params["server.nic_efficiency"].value < 0.9
    # no log has trees above 64 KB: the tree's bandwidth stays at NCCL's 0.9
    assert not params["library.tree_efficiency"].determined
    assert params["library.tree_efficiency"].value == 0.9


def test_eight_gpus_predicted_from_two_and_four(runs):
    result = calibrate([runs[2], runs[4]], a100_hdr_prior())
    held = check(result.cluster, [runs[8]])
    assert all(r.held_out for r in held) and len(held) == 28
    assert _goals_met(held) == {}


def test_sixteen_gpus_goal_rows_held_out(runs):
    """The 16-GPU rows of 1 MB - 1 GB are held out; the fit sees the 1-8 GPU logs and the 16-GPU rows below
    1 MB and above 1 GB (the only rows that show the network)."""
    def keep(run, size):
        return run.num_ranks < 16 or not (1 << 20) <= size <= (1 << 30)

    result = calibrate([runs[n] for n in (2, 4, 8, 16)], a100_hdr_prior(), keep=keep)
    held = [r for r in result.residuals if r.held_out]
    assert {r.size_bytes for r in held} == {1 << k for k in range(20, 31)} and {r.num_gpus for r in held} == {16}
    assert _goals_met(held) == {}


def test_one_server_logs_say_nothing_about_the_network(runs):
    result = calibrate([runs[n] for n in (1, 2, 4, 8)], a100_hdr_prior())
    nic = next(p for p in result.params if p.name == "server.nic_efficiency")
    assert not nic.determined and nic.value == nic.prior
    # the data-sheet efficiency (0.99 of 8 x 200 Gb/s) is far from what the 16-GPU run reached
    misses = _goals_met(check(result.cluster, [runs[16]]))
    assert misses.get((16, ">= 64 MB"), 0) > 20


def test_larger_runs_stay_below_the_nic_bound(fit_all):
    cluster = fit_all.cluster
    s = cluster.server
    bound = s.nics_per_server * s.nic_bandwidth_Bps * s.nic_efficiency / 1e9
    for n in (32, 64, 128):
        rows = predict_nccl_table(cluster, n, [1 << k for k in range(20, 33)])
        busbw = [r["busbw_GBps"] for r in rows]
        assert max(busbw) <= bound * 1.001 and busbw[-1] > 0.85 * bound
        assert busbw[-1] > busbw[0]


def test_bench_tables_of_two_hosts_predict_eight():
    """Recovery on synthetic `collectives bench` tables: made by a Gloo-like cluster whose NIC reaches 60 % of
    1 Gb/s, fitted from 2 and 4 hosts, the 8-host table is predicted within 5 %."""
    from dataclasses import replace

    from fabriclab.fabric.cluster import prior_cluster, with_server
    from fabriclab.fabric.links import parse_link
    from fabriclab.nccl.logs import parse_bench_table

    prior = prior_cluster(gpus_per_server=1, gpu_name="CPU", intra="pcie", nic=parse_link("1Gbps"),
                          nics_per_server=1, library="gloo")
    lat = prior.library.latencies["ring"]["Simple"]
    truth = with_server(replace(prior, library=replace(prior.library, latencies={"ring": {"Simple": replace(
        lat, net_step_s=120e-6)}})), nic_efficiency=0.6)
    sizes = [1 << k for k in range(10, 25, 2)]

    def table(hosts):
        lines = [f"# collectives bench: allreduce, {hosts} ranks, 5 iters (+2 warm-up); GB/s = 1e9 B/s",
                 "# algo  size(B)  count(elements)  type  redop  root  time(us)  algbw(GB/s)  busbw(GB/s)  #wrong"]
        for r in predict_nccl_table(truth, hosts, sizes):
            lines.append(f"  native  {r['size_bytes']}  {r['count']}  float32  sum  -1  {r['time_us']:.1f}  "
                         f"{r['algbw_GBps']:.4f}  {r['busbw_GBps']:.4f}  0")
        return parse_bench_table("\n".join(lines) + "\n", f"bench{hosts}.txt")[0]

    result = calibrate([table(2), table(4)], prior)
    params = {p.name: p for p in result.params}
    assert params["server.nic_efficiency"].value == pytest.approx(0.6, rel=0.05)
    held = check(result.cluster, [table(8)])
    assert max(abs(r.error_pct) for r in held) < 5
