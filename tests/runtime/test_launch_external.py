"""Running under a cluster launcher without the cluster: processes started here with the environment
`srun` or `mpirun` gives its tasks join one launch, run `fabriclab collectives bench` unchanged, and
the record names the launcher, the hosts and the ranks. Plus the device and backend rules checked
before any rank starts (CUDA, one GPU per rank under NCCL, MPI builds), with the GPU count faked.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

from fabriclab.runtime.devices import (check_devices, check_one_gpu_per_rank, device_backend, device_p2p,
                                       placement, rank_device)
from fabriclab.runtime.environment import detect_launch, resolve_backend
from fabriclab.runtime.executor import BufferPool, _staged
from fabriclab.runtime.launch import LaunchConfig, launch

BENCH = ["collectives", "bench", "--np", "2", "--algo", "ring,native", "--sizes", "1KB,64KB", "--iters", "2",
         "--warmup", "1"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_env(rank: int, port: int) -> dict[str, str]:
    return {"SLURM_PROCID": str(rank), "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0", "SLURM_LOCALID": str(rank),
            "SLURM_NODEID": "0", "SLURM_STEP_NODELIST": "localhost", "SLURM_STEP_TASKS_PER_NODE": "2",
            "SLURM_JOB_ID": "77", "MASTER_PORT": str(port)}


def openmpi_env(rank: int, port: int) -> dict[str, str]:
    return {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": str(rank),
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_PORT": str(port)}


@pytest.mark.parametrize("launcher, make_env", [("slurm", slurm_env), ("openmpi", openmpi_env)])
def test_collectives_bench_joins_a_cluster_launch(launcher, make_env, tmp_path):
    port, record = free_port(), tmp_path / "record.json"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "PMI_"))
            and k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    procs = [subprocess.Popen([sys.executable, "-m", "fabriclab", *BENCH, "--json", str(record)],
                              env={**base, **make_env(rank, port)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for rank in range(2)]
    outputs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert "#wrong" in outputs[0] and "#wrong" not in outputs[1]  # only rank 0 reports
    data = json.loads(record.read_text())
    launch_facts = data["config"]["launch"]
    assert (launch_facts["launcher"], launch_facts["num_ranks"], launch_facts["num_hosts"]) == (launcher, 2, 1)
    assert launch_facts["hosts"][0]["ranks"] == [0, 1] and launch_facts["hosts"][0]["devices"] == ["cpu", "cpu"]
    assert len(data["results"]) == 4 and all(row["num_wrong"] == 0 and row["num_ranks"] == 2 for row in data["results"])


def test_each_launcher_says_how_many_of_its_ranks_share_a_host():
    assert detect_launch(openmpi_env(1, 5000)).local_world_size == 2
    slurm = detect_launch({**slurm_env(1, 5000), "SLURM_STEP_TASKS_PER_NODE": "4(x2),2", "SLURM_NODEID": "2"})
    assert (slurm.kind, slurm.local_world_size, slurm.master_addr) == ("slurm", 2, "localhost")
    second = detect_launch({**slurm_env(0, 1), "SLURM_STEP_TASKS_PER_NODE": "4(x2),2", "SLURM_NODEID": "1"})
    assert second.local_world_size == 4
    assert detect_launch({**slurm_env(0, 1), "SLURM_NTASKS_PER_NODE": "8"}).local_world_size == 8
    assert detect_launch({**slurm_env(0, 1), "SLURM_STEP_TASKS_PER_NODE": "garbage"}).local_world_size is None
    pmi = detect_launch({"PMI_RANK": "1", "PMI_SIZE": "4", "MPI_LOCALNRANKS": "2", "MASTER_ADDR": "h0"})
    assert (pmi.kind, pmi.local_world_size) == ("pmi", 2)
    torchrun = detect_launch({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
                              "MASTER_ADDR": "h0", "TORCHELASTIC_RUN_ID": "x", "TORCHELASTIC_RESTART_COUNT": "2"})
    assert (torchrun.kind, torchrun.local_world_size, torchrun.store_prefix) == ("torchrun", 4, "restart2")
    emu = detect_launch({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "10.77.0.1", "FABRICLAB_EMU_HOST": "flh1"})
    assert (emu.kind, emu.store_prefix) == ("emu", "")
    assert detect_launch({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "h"}).kind == "env"


def test_backend_follows_the_device_and_refuses_what_cannot_work():
    assert resolve_backend("cpu") == "gloo" and resolve_backend("cuda") == "nccl"
    assert resolve_backend("cuda", "gloo") == "gloo" and resolve_backend("cpu", "mpi") == "mpi"
    with pytest.raises(ValueError, match="NCCL moves CUDA tensors only"):
        resolve_backend("cpu", "nccl")
    with pytest.raises(ValueError, match="unknown backend 'ucx'"):
        resolve_backend("cpu", "ucx")
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        LaunchConfig(device="tpu")
    assert LaunchConfig(device="cuda").resolved_backend == "nccl" and LaunchConfig().resolved_backend == "gloo"


@pytest.fixture
def fake_gpus(monkeypatch):
    """Pretend this machine has `n` GPUs and NCCL and MPI builds (the checks only ask torch)."""
    def fake(n: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
        monkeypatch.setattr(dist, "is_mpi_available", lambda: True)
    return fake


def test_nccl_needs_a_gpu_per_rank_and_gloo_shares_them(fake_gpus):
    fake_gpus(2)
    assert check_devices("cuda", None, 2) == "nccl" and check_devices("cuda", None, None) == "nccl"
    with pytest.raises(ValueError, match="NCCL needs one GPU per rank: 3 ranks on this host but 2 GPUs; use --np 2"):
        check_devices("cuda", None, 3)
    assert check_devices("cuda", "gloo", 8) == "gloo" and check_devices("cuda", "mpi", 8) == "mpi"
    assert [rank_device("cuda", "gloo", r) for r in range(3)] == [torch.device("cuda", i) for i in (0, 1, 0)]
    assert rank_device("cuda", "nccl", 1) == torch.device("cuda", 1) and rank_device("cpu", "gloo", 5).type == "cpu"
    with pytest.raises(ValueError, match="local rank 2 has no GPU of its own"):
        rank_device("cuda", "nccl", 2)
    fake_gpus(1)  # one GPU visible: this process's own (srun --gpus-per-task=1) or the host's only one
    assert rank_device("cuda", "nccl", 3) == torch.device("cuda", 0)
    fake_gpus(0)
    with pytest.raises(ValueError, match="no CUDA GPU is usable here"):
        check_devices("cuda", "gloo", 1)


def test_two_ranks_on_one_gpu_are_named_under_nccl():
    def fact(host, uuid):
        return {"host": host, "local_rank": 0, "device": "cuda:0", "gpu": "H100", "gpu_uuid": uuid}

    check_one_gpu_per_rank([fact("a", "G1"), fact("a", "G2"), fact("b", "G1"), fact("c", None), fact("c", None)])
    with pytest.raises(ValueError, match="ranks 0 and 2 on a both use cuda:0"):
        check_one_gpu_per_rank([fact("a", "G1"), fact("b", "G1"), fact("a", "G1")])


def test_a_launch_refuses_before_any_rank_starts(monkeypatch):
    monkeypatch.setattr(dist, "is_mpi_available", lambda: False)
    with pytest.raises(ValueError, match="built without MPI"):
        launch(lambda ctx: None, config=LaunchConfig(num_ranks=2, backend="mpi"))


def _backends(ctx):
    return (device_backend(ctx.group, "cpu"), device_backend(ctx.group, "cuda"), device_p2p(ctx.group, "cpu"),
            device_p2p(ctx.group, "cuda"), ctx.backend, ctx.placement)


def test_gloo_groups_stage_cuda_tensors_and_the_placement_is_gathered():
    outcome = launch(_backends, config=LaunchConfig(num_ranks=2))
    cpu, cuda, cpu_p2p, cuda_p2p, backend, where = outcome.results[0]
    assert (cpu, cuda, cpu_p2p, cuda_p2p, backend) == ("gloo", "gloo", True, False, "gloo")
    assert outcome.placement == where and outcome.results[1][5] == where
    assert where["launcher"] == "local" and where["num_ranks"] == 2 and where["hosts"][0]["ranks"] == [0, 1]


def test_staging_runs_on_a_host_copy_and_copies_back():
    pool, seen = BufferPool(), []
    tensor = torch.arange(6, dtype=torch.float32)

    def run(host):
        seen.append(host.data_ptr() != tensor.data_ptr() and host.tolist() == list(range(6)))
        host.mul_(2)

    assert _staged(tensor, pool, run) is tensor and tensor.tolist() == [0, 2, 4, 6, 8, 10] and seen == [True]
    assert pool.get(6, torch.float32, torch.device("cpu"), slot="stage").data_ptr() != \
        pool.get(6, torch.float32, torch.device("cpu")).data_ptr()  # staging never shares the temporaries


def test_placement_groups_ranks_by_host():
    facts = [{"host": "a", "local_rank": 0, "device": "cuda:0", "gpu": "H100"},
             {"host": "b", "local_rank": 0, "device": "cuda:0", "gpu": "H100"},
             {"host": "a", "local_rank": 1, "device": "cuda:1", "gpu": "H100"},
             {"host": "a", "local_rank": 2, "device": "cuda:1", "gpu": "H100"}]
    where = placement("slurm", "gloo", facts)
    assert (where["num_hosts"], where["num_gpus"], where["num_ranks"]) == (2, 3, 4)
    assert where["hosts"][0] == {"host": "a", "ranks": [0, 2, 3], "devices": ["cuda:0", "cuda:1", "cuda:1"],
                                 "gpus": ["cuda:0 H100", "cuda:1 H100"]}
