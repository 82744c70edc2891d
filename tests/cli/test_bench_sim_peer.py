"""`bench sim --peer simgrid`'s table where SimGrid is missing: the column says so (the install line is a note)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from fabriclab.bench.speed import sim, simgrid_peer
from fabriclab.cli.bench.speed import _peer_table


def test_without_simgrid_the_column_says_not_installed_and_how_to_install():
    row = simgrid_peer.beside(next(c for c in sim.CASES if c.name == "ring-256"), runs=1, timeout_s=120, binary=None)
    assert row["simgrid"] is None and row["simulated_s"] > 0 and row["peak_MiB"] > 10
    console = Console(width=200, record=True)
    console.print(_peer_table([row], None))
    assert "not installed" in console.export_text()
    assert "libsimgrid-dev" in simgrid_peer.INSTALL_HINT


@pytest.mark.parametrize("args, fragment", [
    (("--peer", "ns3"), "the one peer is simgrid"),
    (("--peer", "simgrid", "--cases", "ring-9"), "unknown cases ['ring-9']"),
    (("--peer", "simgrid", "--peer-timeout", "0s"), "--peer-timeout 0s"),
    (("--peer", "simgrid", "--runs", "0"), "--runs")])
def test_bad_peer_options_get_one_clean_line(args, fragment):
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2] / "src"))
    done = subprocess.run([sys.executable, "-m", "fabriclab", "bench", "sim", *args], capture_output=True, text=True,
                          timeout=60, env=env)
    assert done.returncode == 2 and fragment in done.stderr and "Traceback" not in done.stderr
