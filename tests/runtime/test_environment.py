"""Launch detection from the environment, and the modules the CLI imports before it knows it needs torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fabriclab.runtime.environment import _first_host, detect_launch


@pytest.mark.parametrize("module", ["fabriclab.collectives.matching", "fabriclab.runtime.environment"])
def test_torch_free_modules_do_not_import_torch(module):
    code = f"import {module}, sys; assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_check_sees_torch_when_it_is_imported():
    """The assertion above can fail: a module that imports torch trips it."""
    code = "import fabriclab.runtime.launch, sys; assert 'torch' not in sys.modules"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "AssertionError" in done.stderr


def test_detect_launch_reads_each_launcher():
    assert detect_launch({}) is None
    torchrun = detect_launch({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "node1",
                              "MASTER_PORT": "1234", "TORCHELASTIC_USE_AGENT_STORE": "True"})
    assert (torchrun.kind, torchrun.rank, torchrun.world_size, torchrun.local_rank) == ("torchrun", 3, 8, 1)
    assert (torchrun.master_addr, torchrun.master_port, torchrun.hosts_store) == ("node1", 1234, False)
    slurm = detect_launch({"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_STEP_ID": "0",
                           "SLURM_LOCALID": "0", "SLURM_JOB_NODELIST": "gpu[07-09,12]", "SLURM_JOB_ID": "4242"})
    assert (slurm.kind, slurm.master_addr, slurm.master_port, slurm.hosts_store) == ("slurm", "gpu07", 29742, True)
    ompi = detect_launch({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
                          "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_PORT": "5000"})
    assert (ompi.kind, ompi.rank, ompi.master_addr) == ("openmpi", 1, "127.0.0.1")
    pmi = detect_launch({"PMI_RANK": "0", "PMI_SIZE": "2", "MASTER_ADDR": "h0"})
    assert (pmi.kind, pmi.master_addr, pmi.master_port) == ("pmi", "h0", 29500)
    with pytest.raises(ValueError, match="set MASTER_ADDR"):
        detect_launch({"PMI_RANK": "0", "PMI_SIZE": "4", "MPI_LOCALNRANKS": "2"})
    with pytest.raises(ValueError, match="whole numbers"):
        detect_launch({"RANK": "x", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"})
    # A Slurm batch script (no srun step) runs --np locally.
    assert detect_launch({"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "1"}) is None


@pytest.mark.parametrize("nodelist, first", [
    ("node07", "node07"), ("a1,a2", "a1"), ("gpu[07-09,12]", "gpu07"), ("node[3,5],gpu1", "node3"),
    ("gpu1,node[07-09]", "gpu1"), ("x[10-11],y[1-2]", "x10"),
])
def test_first_host_of_a_slurm_node_list(nodelist, first):
    assert _first_host(nodelist) == first


def test_rank_outside_the_world_is_refused():
    with pytest.raises(ValueError, match="outside a world of 2"):
        detect_launch({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "h"})
