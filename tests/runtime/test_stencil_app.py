"""The stencil mini-app: the halo exchange is numerically exact (1 rank = 2 = 4 ranks = numpy), timings, and
the staging through host memory of CUDA tensors over Gloo, run here on the CPU with the device check faked."""

import numpy as np
import pytest
import torch

from fabriclab.runtime import stencil
from fabriclab.runtime.launch import LaunchConfig, launch
from fabriclab.runtime.stencil import StencilConfig, on_host_if_needed, stencil_rank

CELLS = 8


def _reference(cells: int, steps: int, a: float) -> np.ndarray:
    """The same update with numpy's periodic rolls, in the same operation order."""
    x, y, z = np.meshgrid(*[np.arange(cells, dtype=np.float64)] * 3, indexing="ij")
    u = np.remainder(7 * x + 13 * y + 29 * z + x * y * z, 17) / 17
    for _ in range(steps):
        s = np.roll(u, 1, 0) + np.roll(u, -1, 0)
        s = s + np.roll(u, 1, 1)
        s = s + np.roll(u, -1, 1)
        s = s + np.roll(u, 1, 2)
        s = s + np.roll(u, -1, 2)
        u = u + (s - u * 6.0) * a
    return u


def _run(num_ranks: int, **options) -> dict:
    config = StencilConfig(cells=CELLS, steps=3, warmup=1, dtype="float64", gather=True, **options)
    return launch(stencil_rank, (config,), config=LaunchConfig(num_ranks=num_ranks, timeout_s=30)).results[0]


@pytest.fixture(scope="module")
def one_rank() -> dict:
    return _run(1)


def test_one_rank_matches_numpy(one_rank):
    expected = _reference(CELLS, 4, 0.125)
    assert np.array_equal(one_rank["field"], expected)
    assert not np.allclose(expected, expected.mean())  # the field did not flatten out: a real test


@pytest.mark.parametrize("num_ranks, procs", [(2, [2, 1, 1]), (4, [2, 2, 1])])
def test_halo_exchange_gives_the_one_rank_result_bit_for_bit(one_rank, num_ranks, procs):
    # 2 ranks: both x faces go to the same peer (tags keep them apart); 4 ranks: also a y exchange and a
    # z dimension wrapped onto the rank itself.
    out = _run(num_ranks, work=2)  # extra sweeps cost time but never change the result
    assert out["procs"] == procs
    assert np.array_equal(out["field"], one_rank["field"])
    assert out["face_bytes"] == [8 * CELLS * CELLS // procs[1] // procs[2],
                                 8 * CELLS * CELLS // procs[0] // procs[2],
                                 8 * CELLS * CELLS // procs[0] // procs[1]]
    assert out["comm_s"] > 0 and out["compute_s"] > 0 and out["step_max_s"] >= out["comm_max_s"]


def test_config_says_what_to_change():
    with pytest.raises(ValueError, match="a <= 1/6"):
        StencilConfig(coefficient=0.5)
    with pytest.raises(ValueError, match="use one of float32, float64"):
        StencilConfig(dtype="int8")


def staged_stencil_rank(ctx, config: StencilConfig) -> dict:
    """`stencil_rank` with the device check answering as for CUDA tensors over Gloo ("stage it"), so that
    every collective of the stencil takes its host-memory path on a machine without a GPU."""
    asked = []

    def cannot_move(group, device) -> bool:
        asked.append(torch.device(device).type)
        return False

    stencil.device_p2p = cannot_move  # this rank's process only: it ends with the launch
    result = stencil_rank(ctx, config)
    result["asked"] = asked
    return result


def test_every_collective_of_the_stencil_staged_through_the_host_gives_the_same_field(one_rank):
    # On a GPU over Gloo the final gather raised "ProcessGroupGloo::allgather: invalid tensor type".
    config = StencilConfig(cells=CELLS, steps=3, warmup=1, dtype="float64", gather=True)
    out = launch(staged_stencil_rank, (config,), config=LaunchConfig(num_ranks=2, timeout_s=30)).results[0]
    assert np.array_equal(out["field"], one_rank["field"])
    assert out["asked"] == ["cpu", "cpu"]  # the halo buffers, then the field's gather


def test_a_tensor_the_backend_cannot_move_is_copied_to_the_host(monkeypatch):
    x = torch.arange(6.0).reshape(2, 3)
    assert on_host_if_needed(x) is x  # CPU tensors move as they are
    monkeypatch.setattr(stencil, "device_p2p", lambda group, device: False)
    staged = on_host_if_needed(x[:, 1:])
    assert staged.device.type == "cpu" and staged.is_contiguous() and torch.equal(staged, x[:, 1:])
    assert staged.data_ptr() != x[:, 1:].data_ptr()
