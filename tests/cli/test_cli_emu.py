"""Root tests of `fabriclab emu up|status|run|down` through the CLI, presets included."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from fabriclab.emu import netns
from fabriclab.emu.cluster import teardown_cluster
from fabriclab.emu.state import cluster_lock, name_tag, state_path

pytestmark = pytest.mark.root

runner = CliRunner()


@pytest.fixture
def cli(emu_root, emu_app):
    def invoke(*args: str):
        return runner.invoke(emu_app, ["emu", *args], env={"COLUMNS": "200"})

    yield invoke
    with cluster_lock():
        teardown_cluster()


def test_up_status_run_down(cli, tmp_path):
    up = cli("up", "--topology", "star", "--hosts", "3", "--link", "200Mbps", "--latency", "50us",
             "--json", str(tmp_path / "up.json"))
    assert up.exit_code == 0, up.output
    assert "latency: NOT emulated" in up.stdout and "200 Mbit/s / D=1 -> 200 Mbit/s" in up.stdout
    assert json.loads((tmp_path / "up.json").read_text())["results"]["hosts"][2]["ip"] == "10.77.0.3"
    assert state_path().exists() and netns.our_namespaces() == ["flh0", "flh1", "flh2", "fls0"]

    status = cli("status")
    assert status.exit_code == 0, status.output
    assert status.stdout.count("3/3") == 2

    code = "import os; print('RANK=' + os.environ['RANK'], 'WORLD_SIZE=' + os.environ['WORLD_SIZE'])"
    run = cli("run", "--", sys.executable, "-c", code)
    assert run.exit_code == 0, run.output
    assert "[2] RANK=2 WORLD_SIZE=3" in run.stdout and "all 3 ranks exited 0" in run.stdout

    code = "import os, sys, time; r = int(os.environ['RANK']); time.sleep(0.2 if r == 2 else 30); sys.exit(5)"
    failed = cli("run", "--rank0-only", "--", sys.executable, "-c", code)
    assert failed.exit_code == 5
    assert "rank 2 (flh2) failed with exit code 5" in failed.stderr and "stopped ranks 0, 1" in failed.stderr

    down = cli("down")
    assert down.exit_code == 0 and "removed 4" in down.stdout
    assert netns.our_namespaces() == [] and not state_path().exists()
    assert "no emulated cluster is up" in cli("status").stdout
    assert cli("run", "--", "true").exit_code == 1


def test_preset_and_stale_namespaces_without_state(cli):
    up = cli("up", "--topology", "fat-tree", "--hosts", "4", "--hosts-per-leaf", "2", "--bisection", "1/2",
             "--preset", "25gbe")
    assert up.exit_code == 0, up.output
    assert "25 Gbit/s / D=100 -> 250 Mbit/s" in up.stdout
    state_path().unlink()
    stale = cli("status")
    assert stale.exit_code == 1 and "stale" in stale.stderr
    again = cli("up", "--topology", "star", "--hosts", "2", "--preset", "100g-opa", "--scale", "1/50")
    assert again.exit_code == 0 and "100 Gbit/s / D=50 -> 2 Gbit/s" in again.stdout
    assert netns.our_namespaces() == ["flh0", "flh1", "fls0"]
    state_path().unlink()
    assert "removed 3" in cli("down").stdout and netns.our_namespaces() == []


def test_down_removes_only_the_cluster_of_its_state_file(cli, emu_app, tmp_path):
    # Another user's cluster, made through a state file of its own: `up` and `down` of the default state file
    # leave it alone, `down --all` removes it too.
    theirs = {"COLUMNS": "200", "FABRICLAB_EMU_STATE": str(tmp_path / "theirs.json")}
    tag = name_tag(tmp_path / "theirs.json")
    try:
        up = runner.invoke(emu_app, ["emu", "up", "--topology", "star", "--hosts", "2", "--link", "200Mbps"],
                           env=theirs)
        assert up.exit_code == 0, up.output
        assert netns.our_namespaces(tag) == [f"fl{tag}h0", f"fl{tag}h1", f"fl{tag}s0"]
        mine = cli("up", "--topology", "star", "--hosts", "3", "--link", "200Mbps")
        assert mine.exit_code == 0 and len(netns.our_namespaces(tag)) == 3
        down = cli("down")
        assert "removed 4: flh0 flh1 flh2 fls0" in down.stdout, down.output
        assert "left alone: 3 namespaces of other emulated clusters" in down.stdout
        assert len(netns.our_namespaces(tag)) == 3 and netns.our_namespaces("") == []
        status = runner.invoke(emu_app, ["emu", "status"], env=theirs)
        assert status.exit_code == 0 and status.stdout.count("3/3") == 1, status.output
        assert "nothing to remove" in cli("down").stdout
        assert "removed 3" in cli("down", "--all").stdout and netns.our_namespaces(tag) == []
    finally:
        runner.invoke(emu_app, ["emu", "down"], env=theirs)
