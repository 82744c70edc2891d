"""The collectives benchmark and the stencil on a GPU: NCCL with one rank (two where there are two GPUs),
Gloo with two ranks sharing one GPU (CUDA tensors staged through host memory), every collective with a
schedule and the backend's own, #wrong 0; the stencil's field on the GPU equals the CPU's bit for bit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fabriclab.bench.stencil.run import run_stencil
from fabriclab.runtime.stencil import StencilConfig

pytestmark = pytest.mark.gpu
ALGOS = {"allreduce": "ring,butterfly,double-binary-tree,native", "reduce": "chain,binomial,native",
         "broadcast": "binomial,chain,native", "reduce_scatter": "ring,recursive,native",
         "allgather": "ring,direct,native"}


def _bench(fabriclab, tmp_path, *args: str) -> dict:
    record = tmp_path / "bench.json"
    done = fabriclab("collectives", "bench", "--device", "cuda", "--sizes", "4KB:16MB:x4", "--iters", "5",
                     "--warmup", "2", "--json", str(record), *args)
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(record.read_text())
    assert data["results"] and all(row["num_wrong"] == 0 for row in data["results"])
    print(done.stdout)
    return data


def test_nccl_with_one_rank(fabriclab, tmp_path):
    data = _bench(fabriclab, tmp_path, "--np", "1", "--algo", "ring,butterfly,native")
    launch = data["config"]["launch"]
    assert launch["backend"] == "nccl" and launch["num_gpus"] == 1 and launch["hosts"][0]["devices"] == ["cuda:0"]


@pytest.mark.parametrize("op", list(ALGOS))
def test_gloo_with_two_ranks_sharing_one_gpu(fabriclab, tmp_path, op):
    data = _bench(fabriclab, tmp_path, "--np", "2", "--backend", "gloo", "--op", op, "--algo", ALGOS[op])
    assert data["config"]["launch"]["backend"] == "gloo" and data["config"]["launch"]["num_ranks"] == 2


@pytest.mark.parametrize("op", list(ALGOS))
def test_nccl_with_two_ranks(fabriclab, tmp_path, two_gpus, op):
    _bench(fabriclab, tmp_path, "--np", "2", "--op", op, "--algo", ALGOS[op])


@pytest.mark.parametrize("num_ranks, backend", [(1, None), (2, "gloo")])
def test_stencil_on_the_gpu_equals_the_cpu(num_ranks, backend):
    config = dict(cells=16, steps=3, warmup=1, gather=True)
    gpu, _ = run_stencil(StencilConfig(**config, device="cuda", backend=backend), num_ranks)
    cpu, _ = run_stencil(StencilConfig(**config), num_ranks)
    assert np.array_equal(gpu["field"], cpu["field"])
    assert gpu["launch"]["num_gpus"] == 1
