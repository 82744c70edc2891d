"""The host's dispatch of a step's kernels (`fabric/host.py`): a price per kernel by how the framework
dispatches, the routed experts' kernels outside CUDA graphs."""

import pytest

from fabriclab.fabric.host import EAGER_LAUNCH_S, HOSTS, TE_LAUNCH_S, HostModel, host_model
from fabriclab.fabric.kernels import Attention, Gemm, HostSync, MemoryPass, launches


def test_every_kind_has_a_model_and_eager_is_the_measured_11_us():
    assert {host_model(k).kind for k in HOSTS} == set(HOSTS)
    assert host_model("eager").launch_s == EAGER_LAUNCH_S == 11e-6  # a copy_ loop on the H200 and H100
    assert TE_LAUNCH_S < EAGER_LAUNCH_S
    with pytest.raises(ValueError, match="give one of eager, te, cuda-graphs"):
        host_model("jax")
    with pytest.raises(ValueError, match="seconds per kernel"):
        HostModel(kind="te", launch_s=-1.0)


def test_a_kernel_costs_a_launch_per_kernel_it_runs():
    te = host_model("te")
    grouped = Gemm(256, 1536, 2048, count=16, grouped=True, routed=True)  # one cuBLAS GEMM per expert
    assert launches(grouped) == 16 and te.kernel_s(grouped) == pytest.approx(16 * TE_LAUNCH_S)
    assert te.kernel_s(MemoryPass(1e6, kernels=31)) == pytest.approx(31 * TE_LAUNCH_S)  # the fused router
    assert te.kernel_s(Attention(1, 32, 4096, 4096, 128)) == TE_LAUNCH_S
    assert te.kernel_s(Gemm(8192, 8192, 8192, chunks=4)) == pytest.approx(4 * TE_LAUNCH_S)


def test_cuda_graphs_replay_the_static_kernels_and_leave_the_routed_experts():
    graphs = host_model("cuda-graphs")
    static = (MemoryPass(1e6), Gemm(4096, 256, 7168, bf16=True), MemoryPass(1e6, kernels=31))
    routed = (HostSync(), Gemm(256, 1536, 2048, count=16, grouped=True, routed=True))
    assert graphs.op_s(static) == pytest.approx(graphs.launch_s)  # one graph launch for the op
    assert graphs.op_s(static + routed) == pytest.approx(graphs.launch_s * (1 + 1 + 16))
    assert host_model("te").op_s(static) == pytest.approx(33 * TE_LAUNCH_S)
