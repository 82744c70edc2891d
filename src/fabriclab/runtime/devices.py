"""Where a rank's tensors live and which backend moves them, checked before any rank starts.

* `check_devices(device, backend, local_ranks)`: CUDA is there; NCCL gets one GPU per rank of a host
  (NCCL refuses two ranks on one GPU); several ranks may share one GPU over Gloo with CUDA tensors (a
  one-GPU box can still test multi-rank); `mpi` only where torch was built with it.
* `rank_device(device, backend, local_rank)`: `cpu`, or `cuda:<local rank>` (modulo the GPUs over Gloo).
* `group_backend(backend)`: what `init_process_group` gets. NCCL becomes `cpu:gloo,cuda:nccl`, torch's
  per-device backends on one group: CUDA tensors go over NCCL while the small CPU tensors and objects
  the harnesses gather (timings, digests, this placement) go over Gloo, unchanged from CPU runs.
* `device_backend(group, device)`: the backend that moves tensors of `device` on `group`.
* `rank_facts` / `placement`: every rank's host, local rank, device and GPU, gathered once per launch:
  the `launch` part of a run's record (launcher, hosts, ranks, GPUs).

Try it: `fabriclab collectives bench --device cuda --backend gloo --np 2 --sizes 1MB` (two ranks on one GPU).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from fabriclab.runtime.environment import host_name, resolve_backend

# Backends that move CUDA tensors point to point themselves; the others (Gloo: its send and receive take
# host memory only; MPI: CUDA-aware builds are not the rule) get them staged through host memory.
DEVICE_P2P_BACKENDS = ("nccl",)


def check_devices(device: str, backend: str | None, local_ranks: int | None) -> str:
    """The backend to use (`resolve_backend`), after checking this machine can run `local_ranks` ranks
    of a host on `device` with it; a ValueError says what to change. None: the host's rank count is
    unknown (a launcher that does not say), then only CUDA's presence is checked here."""
    backend = resolve_backend(device, backend)
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA GPU is usable here (torch.cuda.is_available() is False); "
                         "use --device cpu")
    if backend == "mpi" and not dist.is_mpi_available():
        raise ValueError("this torch was built without MPI: use --backend gloo (or nccl on GPUs), or a torch "
                         "built from source against your MPI")
    if backend == "nccl" and not dist.is_nccl_available():
        raise ValueError("this torch was built without NCCL: use --backend gloo")
    if device == "cuda":
        gpus = torch.cuda.device_count()
        if backend == "nccl" and local_ranks is not None and local_ranks > gpus:
            raise ValueError(f"NCCL needs one GPU per rank: {local_ranks} ranks on this host but {gpus} GPU"
                             f"{'s' if gpus != 1 else ''}; use --np {gpus}, or --backend gloo to share GPUs")
    return backend


def rank_device(device: str, backend: str, local_rank: int) -> torch.device:
    """The device of the rank with `local_rank` on its host: the GPU of its local rank (NCCL: exactly
    that one, which `check_devices` made sure exists; Gloo/MPI: round robin over the GPUs there are)."""
    if device != "cuda":
        return torch.device("cpu")
    gpus = torch.cuda.device_count()
    if gpus == 1:  # the only GPU this process sees (a launcher may show each task its own)
        return torch.device("cuda", 0)
    if backend == "nccl" and local_rank >= gpus:
        raise ValueError(f"NCCL needs one GPU per rank: local rank {local_rank} has no GPU of its own "
                         f"({gpus} here); start at most {gpus} ranks per host, or use --backend gloo")
    return torch.device("cuda", local_rank % gpus)


def compute_device(device: str) -> torch.device:
    """`cpu`, or the current CUDA device (the launcher sets it to the GPU of the rank's local rank)."""
    if device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA GPU is usable here (torch.cuda.is_available() is False); "
                         "use --device cpu")
    return torch.device("cuda", torch.cuda.current_device())


def group_backend(backend: str) -> str:
    """The `init_process_group` backend: NCCL for CUDA tensors with Gloo beside it for CPU ones."""
    return "cpu:gloo,cuda:nccl" if backend == "nccl" else backend


def device_backend(group=None, device: torch.device | str = "cpu") -> str:
    """Which backend moves tensors of `device` on `group` (gloo, nccl, mpi, ...)."""
    config = str(dist.get_backend_config(group))
    kind = torch.device(device).type
    pairs = dict(pair.split(":", 1) for pair in config.split(",") if ":" in pair)
    return pairs.get(kind, config if not pairs else next(iter(pairs.values())))


def device_p2p(group, device: torch.device | str) -> bool:
    """True when the backend sends and receives tensors of `device` where they are (CPU tensors always;
    CUDA tensors over NCCL); False when they must be staged through host memory."""
    return torch.device(device).type == "cpu" or device_backend(group, device) in DEVICE_P2P_BACKENDS


def rank_facts(local_rank: int, device: torch.device) -> dict:
    """This rank's host, local rank, device, GPU model and GPU identity (None on the CPU)."""
    gpu = uuid = None
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        gpu, uuid = props.name, str(getattr(props, "uuid", "")) or None
    return {"host": host_name(), "local_rank": local_rank, "device": str(device), "gpu": gpu, "gpu_uuid": uuid}


def check_one_gpu_per_rank(facts: list[dict]) -> None:
    """Under NCCL, a ValueError when two ranks of a host drive the same GPU (NCCL refuses it), from every
    rank's `rank_facts`: what the GPU count cannot tell when a launcher shows each task one GPU."""
    seen: dict[tuple, int] = {}
    for rank, fact in enumerate(facts):
        key = (fact["host"], fact.get("gpu_uuid") or None)
        if key[1] is None:
            continue
        if key in seen:
            raise ValueError(f"NCCL needs one GPU per rank: ranks {seen[key]} and {rank} on {fact['host']} both "
                             f"use {fact['device']} ({fact['gpu']}); give each task a GPU of its own (srun "
                             f"--gpus-per-task=1, or all GPUs visible to every task), or use --backend gloo")
        seen[key] = rank


def placement(launcher: str, backend: str, facts: list[dict]) -> dict:
    """Where the ranks ran, from every rank's `rank_facts` (in rank order): the record's `launch`."""
    hosts: dict[str, dict] = {}
    for rank, fact in enumerate(facts):
        host = hosts.setdefault(fact["host"], {"host": fact["host"], "ranks": [], "devices": [], "gpus": []})
        host["ranks"].append(rank)
        host["devices"].append(fact["device"])
        gpu = f"{fact['device']} {fact['gpu']}" if fact["gpu"] else None
        if gpu and gpu not in host["gpus"]:
            host["gpus"].append(gpu)
    return {"launcher": launcher, "backend": backend, "num_ranks": len(facts), "num_hosts": len(hosts),
            "num_gpus": sum(len(h["gpus"]) for h in hosts.values()), "hosts": list(hosts.values())}
