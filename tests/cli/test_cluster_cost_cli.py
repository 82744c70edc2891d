"""`--cluster FILE` on `fabriclab whatif` and `fabriclab plan`: bucket costs from the calibrated cluster
model (built here from the shared nccl-tests logs), the two commands agreeing, one-line errors."""

import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from fabriclab.cli import plan as plan_cli
from fabriclab.cli import whatif as whatif_cli
from fabriclab.nccl.predict import collective_times
from fabriclab.whatif.bucket_time import CostModel
from fabriclab.whatif.fusion import FusionPolicy
from fabriclab.workload.profile import load_profile

LOGS = Path(__file__).resolve().parents[2] / "examples" / "nccl-tests-a100"
runner = CliRunner()
app = typer.Typer()


@app.callback()
def _main() -> None:
    """Test app holding whatif and plan."""


whatif_cli.register(app)
plan_cli.register(app)
pytestmark = pytest.mark.skipif(not (LOGS / "nccl_16.log").is_file(), reason="shared nccl-tests logs absent")


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "80", "FABRICLAB_STORE": "off"})


@pytest.fixture(scope="module")
def cluster_file(tmp_path_factory):
    from fabriclab.cli.main import app as main_app

    path = tmp_path_factory.mktemp("cluster") / "cluster.json"
    logs = [str(LOGS / f"nccl_{n}.log") for n in (2, 4, 8, 16)]
    result = runner.invoke(main_app, ["calibrate", "nccl-tests", *logs, "--out", str(path)],
                           env={"COLUMNS": "80", "FABRICLAB_STORE": "off"})
    assert result.exit_code == 0, result.output
    return path


def test_bucket_cost_is_the_cluster_prediction(cluster_file):
    from fabriclab.fabric.cluster import load_cluster

    cluster = load_cluster(cluster_file)
    model = CostModel(kind="cluster", cluster=cluster, num_workers=16)
    sizes = [1 << 10, 3 << 20, 25 << 20, 100 << 20]
    expected, _ = collective_times(cluster, 16, sizes, "allreduce")
    got = [model(s) for s in sizes]
    assert np.allclose(got, expected, rtol=1e-12)
    assert got[0] < got[-1]  # a size-dependent cost, not a constant
    # 8 GPUs stay on one server (NVLink only): cheaper per byte than 16 over the network
    assert CostModel(kind="cluster", cluster=cluster, num_workers=8)(100 << 20) < got[-1]


def test_whatif_cluster_iteration_replays_the_cluster_cost(cluster_file, tmp_path):
    from fabriclab.fabric.cluster import load_cluster
    from fabriclab.whatif.iteration import simulate_iteration

    record = tmp_path / "w.json"
    result = invoke("whatif", "--cluster", cluster_file, "--workers", "16", "--json", record)
    assert result.exit_code == 0, result.output
    (row,) = json.loads(record.read_text())["results"]
    cluster = load_cluster(cluster_file)

    def predicted(size_bytes):  # the cluster model's own allreduce prediction, bucket by bucket
        return float(collective_times(cluster, 16, [max(int(round(size_bytes)), 1)], "allreduce")[0][0])

    from fabriclab.fabric.cluster import cluster_gpu
    from fabriclab.whatif.profiles import profile_for_gpu

    # the V100 profile on the cluster's A100 (converted by the peak ratio, as the output says)
    it = simulate_iteration(profile_for_gpu(load_profile("resnet50"), cluster_gpu(cluster)), FusionPolicy(),
                            predicted)
    assert row["cost"] == "cluster" and row["workers"] == 16 and it.comm_s > 0
    assert row["comm_s"] == pytest.approx(it.comm_s, rel=1e-12)
    assert row["iteration_s"] == pytest.approx(it.iteration_s, rel=1e-12)
    assert row["bandwidth_Gbps"] == pytest.approx(cluster.server.nic_bandwidth_Bps * 8 / 1e9)


def test_whatif_gives_the_range_of_undetermined_parameters(cluster_file, tmp_path):
    from dataclasses import replace

    from fabriclab.fabric.cluster import a100_hdr_prior, load_cluster, save_cluster

    never_fitted = tmp_path / "prior.json"  # a preset: every parameter is a prior
    save_cluster(a100_hdr_prior(), never_fitted)
    slow = replace(a100_hdr_prior(), server=replace(a100_hdr_prior().server, nics_per_server=1,
                                                     nic_bandwidth_Bps=10e9 / 8))
    save_cluster(slow, tmp_path / "slow.json")  # one 10 Gb/s NIC per server: the network matters
    for path in (never_fitted, tmp_path / "slow.json"):
        record = tmp_path / "r.json"
        result = invoke("whatif", "--cluster", path, "--profile", "vgg16", "--workers", "16,32", "--json", record,
                        "--format", "plain")
        assert result.exit_code == 0, result.output
        rows = json.loads(record.read_text())["results"]
        assert all(r["scaling_low"] <= r["scaling_factor"] <= r["scaling_high"] for r in rows)
    assert any(r["scaling_low"] < r["scaling_factor"] - 1e-3 for r in rows)  # the slow cluster: a real range
    assert "range" in result.output
    # the calibrated cluster: rows whose buckets rest on fitted parameters only have no range
    result = invoke("whatif", "--cluster", cluster_file, "--workers", "16", "--json", record)
    (row,) = json.loads(record.read_text())["results"]
    assert row["scaling_low"] <= row["scaling_factor"] <= row["scaling_high"]
    assert load_cluster(cluster_file).fit is not None


def test_plan_and_whatif_agree_with_cluster(cluster_file, tmp_path):
    w = tmp_path / "w.json"
    p = tmp_path / "p.json"
    assert invoke("whatif", "--cluster", cluster_file, "--workers", "64", "--json", w).exit_code == 0
    result = invoke("plan", "--cluster", cluster_file, "--gpus", "64", "--json", p)
    assert result.exit_code == 0, result.output
    wrow = json.loads(w.read_text())["results"][0]
    prow = json.loads(p.read_text())["results"]["rows"][0]
    assert prow["fabric"] == "HDR" and prow["gpus"] == 64 and prow["servers"] == 8
    assert prow["iteration_s"] == pytest.approx(wrow["iteration_s"], rel=1e-12)
    assert prow["scaling_factor"] == pytest.approx(wrow["scaling_factor"], rel=1e-12)
    assert prow["nics_usd"] > 0 and prow["network_usd"] > prow["nics_usd"]


@pytest.mark.parametrize("args,fragment", [
    (("whatif", "--cluster", "{missing}"), "cluster file"),
    (("whatif", "--cluster", "{bad}"), "bad.json"),
    (("plan", "--cluster", "{bad}"), "bad.json"),
    (("plan", "--cluster", "{missing}"), "missing.json"),
    (("whatif", "--cluster", "{good}", "--workers", "12"), "whole servers"),
    (("whatif", "--cluster", "{good}", "--bandwidth", "25Gbps"), "--bandwidth"),
    (("whatif", "--cluster", "{good}", "--cost", "simulated"), "--cost"),
    (("whatif", "--cost", "cluster"), "--cluster FILE"),
    (("plan", "--cluster", "{good}", "--gpus", "12"), "multiples of 8"),
    (("plan", "--cluster", "{good}", "--gpus-per-server", "2"), "--gpus-per-server"),
])
def test_one_line_errors(cluster_file, tmp_path, args, fragment):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    paths = {"missing": tmp_path / "missing.json", "bad": bad, "good": cluster_file}
    result = invoke(*(a.format(**paths) for a in args))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert fragment in lines[0]


def test_plan_says_when_its_recommendation_fails_at_the_pessimistic_end(tmp_path):
    from dataclasses import replace

    from fabriclab.fabric.cluster import a100_hdr_prior, save_cluster

    prior = a100_hdr_prior()  # never fitted: every parameter is a prior, the NIC's efficiency included
    slow = replace(prior, server=replace(prior.server, nics_per_server=1, nic_bandwidth_Bps=25e9 / 8))
    path = tmp_path / "slow.json"
    save_cluster(slow, path)
    record = tmp_path / "p.json"
    # VGG-16's V100 profile on this cluster's A100 (compute x 0.805): scaling 0.381, 0.208 at the low end
    result = invoke("plan", "--cluster", path, "--gpus", "16", "--model", "vgg16", "--target", "0.35",
                    "--json", record, "--format", "plain")
    assert result.exit_code == 0, result.output
    results = json.loads(record.read_text())["results"]
    (row,) = results["rows"]
    assert row["scaling_low"] < 0.35 <= row["scaling_factor"] <= row["scaling_high"]
    (rec,) = results["recommendations"]
    assert rec["row"] == 0 and rec["holds_at_low_end"] is False
    assert "pessimistic end: no option reaches 0.35" in rec["text"]
    assert "scaling range with the cluster's parameters" in result.output
