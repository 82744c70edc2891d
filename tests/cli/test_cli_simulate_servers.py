"""`simulate collective --cluster --servers N`: a run on part of each server (`nccl/layout.on_servers`)."""

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from fabriclab.cli.main import app
from fabriclab.fabric.presets import cluster_preset
from fabriclab.nccl.layout import on_servers
from fabriclab.nccl.predict import collective_times


def _h100():
    c = cluster_preset("dgx-h100")
    return replace(c, library=replace(c.library, nccl_version="2.29.2"))


def test_simulate_predicts_a_run_on_part_of_each_server(tmp_path):
    out = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["simulate", "collective", "--cluster", "dgx-h100", "--gpus", "20", "--servers",
                                   "10", "--sizes", "1GB", "--json", str(out), "--store", "off"])
    assert res.exit_code == 0, res.output
    rec = json.loads(out.read_text())
    assert rec["config"]["num_servers"] == 10 and "10 servers x 2" in res.output
    two = collective_times(on_servers(_h100(), 20, 10), 20, [1 << 30])[0][0]
    preset = cluster_preset("dgx-h100")
    assert rec["results"][0]["time_us"] == pytest.approx(
        collective_times(on_servers(preset, 20, 10), 20, [1 << 30])[0][0] * 1e6, rel=1e-6)
    # two GPUs of each server have two NICs between them: slower than the whole servers' 16 GPUs on 16 NICs
    assert two > collective_times(_h100(), 16, [1 << 30])[0][0]
