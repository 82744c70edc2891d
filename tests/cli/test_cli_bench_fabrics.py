"""Root test of `fabriclab bench fabrics`: one tiny point trained for real in an emulated cluster."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fabriclab.cli.main import app
from fabriclab.emu import netns
from fabriclab.emu.cluster import teardown_cluster
from fabriclab.emu.state import cluster_lock

pytestmark = pytest.mark.root


@pytest.fixture
def cleanup(emu_root):
    """The command takes the emulator's lock itself; afterwards, remove whatever a failure left."""
    yield
    with cluster_lock():
        teardown_cluster()


def test_bench_fabrics_trains_in_the_emulated_cluster(cleanup, tmp_path):
    out = tmp_path / "fab"
    result = CliRunner().invoke(app, ["bench", "fabrics", "--fabrics", "100g-opa", "--workers", "2",
                                      "--algos", "ring", "--steps", "1", "--warmup", "0", "--scale", "1/10",
                                      "--out", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    row = json.loads((out / "fabrics.json").read_text())["results"]["rows"][0]
    assert row["fabric"] == "100g-opa" and row["workers"] == 2 and row["params_agree"]
    # Un-dilated: one V100 ResNet-50 step is ~129 ms, so 2 x 32 images take at least that long.
    assert 0.125 < row["iteration_s"] < 1.0 and row["images_per_sec"] == pytest.approx(64 / row["iteration_s"], rel=0.2)
    assert row["sim_images_per_sec"] > 0 and (out / "fig4.png").exists() and (out / "fig5.png").exists()
    assert netns.our_namespaces() == []  # the cluster is gone
