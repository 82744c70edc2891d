"""The stencil mini-app: the halo exchange is numerically exact (1 rank = 2 = 4 ranks = numpy), timings."""

import numpy as np
import pytest

from fabriclab.runtime.launch import LaunchConfig, launch
from fabriclab.runtime.stencil import StencilConfig, stencil_rank

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
