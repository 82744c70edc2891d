"""Which launch this process belongs to, read from its environment; no torch, so the CLI can ask cheaply.

`detect_launch()` recognises torchrun (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`), Slurm `srun` tasks
(`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_STEP_ID`, node list for the store's host), Open MPI `mpirun`
(`OMPI_COMM_WORLD_*`) and MPICH/Intel MPI PMI launchers (`PMI_RANK`, `PMI_SIZE`) and returns this
process's `Rendezvous`: its rank and where the launch's rendezvous store is (`MASTER_ADDR`/`MASTER_PORT`,
or the defaults below). `fabriclab.runtime.launch` joins it, or spawns local ranks when there is none.
`LaunchError` lives here too, so the CLI can catch it without importing torch, and so does
`resolve_backend`, the rule that picks the torch.distributed backend from the device (nccl on cuda, gloo
on cpu) and refuses combinations that cannot work, before any rank starts.

Try it: `RANK=1 WORLD_SIZE=2 MASTER_ADDR=h0 python -c "from fabriclab.runtime.environment import *;
print(detect_launch())"`.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Mapping

LOOPBACK = "127.0.0.1"
DEVICES = ("cpu", "cuda")
BACKENDS = ("gloo", "nccl", "mpi")
# Set by `fabriclab emu run` in every emulated host: the namespaces share the machine's host name.
EMU_HOST_VAR = "FABRICLAB_EMU_HOST"
# torchrun's default MASTER_PORT (torch.distributed.run).
DEFAULT_PORT = 29500


class LaunchError(RuntimeError):
    """A rank failed, died or never arrived; the message names it and `ranks` lists the ranks at fault."""

    def __init__(self, message: str, ranks: list[int] | tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.ranks = tuple(ranks)


@dataclass(frozen=True, kw_only=True)
class Rendezvous:
    """This process's place in a launch: its rank, and where the ranks meet (the TCP store)."""

    kind: str
    """Who launched it: torchrun, emu (`fabriclab emu run`), env (RANK/WORLD_SIZE set by hand), slurm,
    openmpi, pmi, or local (a rank spawned by `launch.spawn`)."""
    rank: int
    """This process's rank, 0..world_size-1."""
    world_size: int
    """Number of ranks in the launch."""
    local_rank: int
    """Rank among the launch's processes on this host (picks the GPU under NCCL)."""
    master_addr: str
    """Host of the rendezvous store (rank 0's host unless an agent or the spawning parent hosts it)."""
    master_port: int
    """TCP port of the rendezvous store."""
    hosts_store: bool
    """True when this process hosts the TCP store (rank 0 of an external launch without an agent store)."""
    local_world_size: int | None = None
    """Ranks of the launch on this host, where the launcher says (torchrun, mpirun, PMI, srun
    --ntasks-per-node); None when unknown."""
    store_prefix: str = ""
    """Extra prefix of this launch's store keys: torchrun's restart count, so a restarted worker group
    does not read the keys of the attempt before it from the agent's store."""


def detect_launch(env: Mapping[str, str] | None = None) -> Rendezvous | None:
    """The launch this process belongs to, from its environment; None when started by hand."""
    env = os.environ if env is None else env
    master = env.get("MASTER_ADDR")
    agent_store = False
    if "RANK" in env and "WORLD_SIZE" in env:
        # torchrun's agent always sets TORCHELASTIC_*; `fabriclab emu run` sets the same variables itself.
        kind = ("torchrun" if any(k.startswith("TORCHELASTIC_") for k in env)
                else "emu" if EMU_HOST_VAR in env else "env")
        rank, size, local = env["RANK"], env["WORLD_SIZE"], env.get("LOCAL_RANK", "0")
        agent_store = env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        all_local = env.get("LOCAL_WORLD_SIZE") == size
        local_size = env.get("LOCAL_WORLD_SIZE")
    elif "OMPI_COMM_WORLD_RANK" in env:
        kind, rank, local = "openmpi", env["OMPI_COMM_WORLD_RANK"], env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")
        size = env.get("OMPI_COMM_WORLD_SIZE", "")
        all_local = env.get("OMPI_COMM_WORLD_LOCAL_SIZE") == size
        local_size = env.get("OMPI_COMM_WORLD_LOCAL_SIZE")
    elif "PMI_RANK" in env and "PMI_SIZE" in env:
        kind, rank, size, local = "pmi", env["PMI_RANK"], env["PMI_SIZE"], env.get("MPI_LOCALRANKID", "0")
        all_local = env.get("MPI_LOCALNRANKS") == size
        local_size = env.get("MPI_LOCALNRANKS")
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env and "SLURM_STEP_ID" in env:
        # SLURM_STEP_ID: only `srun` tasks join; a batch script that runs `--np 4` spawns locally.
        kind, rank, size, local = "slurm", env["SLURM_PROCID"], env["SLURM_NTASKS"], env.get("SLURM_LOCALID", "0")
        all_local = False
        local_size = _slurm_tasks_here(env)
        master = master or _first_host(env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST", ""))
    else:
        return None
    try:
        rank_i, size_i, local_i = int(rank), int(size), int(local)
        port = int(env.get("MASTER_PORT") or _default_port(env))
        local_size_i = int(local_size) if local_size else None
    except ValueError:
        raise ValueError(f"{kind} launch: rank {rank!r}, size {size!r}, local rank {local!r} and MASTER_PORT "
                         f"{env.get('MASTER_PORT')!r} must be whole numbers") from None
    if not master:
        if not all_local:
            raise ValueError(f"{kind} launch without MASTER_ADDR: set MASTER_ADDR to the host of rank 0")
        master = LOOPBACK
    if not 0 <= rank_i < size_i:
        raise ValueError(f"{kind} launch: rank {rank_i} is outside a world of {size_i} ranks")
    restart = env.get("TORCHELASTIC_RESTART_COUNT", "0") if kind == "torchrun" else "0"
    return Rendezvous(kind=kind, rank=rank_i, world_size=size_i, local_rank=local_i, master_addr=master,
                      master_port=port, hosts_store=rank_i == 0 and not agent_store,
                      local_world_size=local_size_i, store_prefix="" if restart == "0" else f"restart{restart}")


def resolve_backend(device: str, backend: str | None = None) -> str:
    """The torch.distributed backend for `device`: `backend` if given, else nccl on cuda and gloo on cpu.

    Raises a ValueError for an unknown device or backend, and for NCCL on CPU tensors. Whether CUDA,
    enough GPUs or an MPI build are at hand is checked with torch (`runtime.devices.check_devices`)."""
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}: use {' or '.join(DEVICES)}")
    if backend is None:
        return "nccl" if device == "cuda" else "gloo"
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if backend == "nccl" and device != "cuda":
        raise ValueError("NCCL moves CUDA tensors only: use --device cuda with --backend nccl, or --backend gloo")
    return backend


def host_name(env: Mapping[str, str] | None = None) -> str:
    """This rank's host: the emulated host's name inside `fabriclab emu run`, else the machine's."""
    env = os.environ if env is None else env
    return env.get(EMU_HOST_VAR) or socket.gethostname()


def _slurm_tasks_here(env: Mapping[str, str]) -> str | None:
    """Tasks of this Slurm step on this node: SLURM_NTASKS_PER_NODE, or this node's entry of
    SLURM_STEP_TASKS_PER_NODE (`2(x3),1`: 2 on each of the first three nodes, then 1)."""
    if env.get("SLURM_NTASKS_PER_NODE"):
        return env["SLURM_NTASKS_PER_NODE"]
    spec, node = env.get("SLURM_STEP_TASKS_PER_NODE", ""), env.get("SLURM_NODEID")
    if not spec or node is None or not node.isdigit():
        return None
    index = int(node)
    for part in spec.split(","):
        count, _, repeat = part.partition("(x")
        times = repeat.rstrip(")") if repeat else "1"
        if not (count.isdigit() and times.isdigit()):
            return None  # not Slurm's format: the GPU count check then goes by the local rank
        if index < int(times):
            return count
        index -= int(times)
    return None


def _default_port(env: Mapping[str, str]) -> int:
    # torchrun's default port, shifted per Slurm job so two jobs sharing a node do not collide.
    return DEFAULT_PORT + int(env.get("SLURM_JOB_ID", "0")) % 1000


def _first_host(nodelist: str) -> str:
    """First host of a Slurm node list: `node[07-09,12],gpu1` -> `node07`."""
    head, bracket, rest = nodelist.partition("[")
    if not bracket or "," in head:  # the first host has no bracket: `gpu1,node[07-09]` -> `gpu1`
        return nodelist.split(",")[0].strip()
    first = rest.split("]")[0].split(",")[0].split("-")[0]
    return f"{head.split(',')[-1]}{first}"
