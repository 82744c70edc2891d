"""The array forms are exactly the transfers of the schedules they stand for."""

import numpy as np
import pytest

from fabriclab.collectives.registry import build_schedule
from fabriclab.collectives.vectorized import rounds
from fabriclab.sim.collective import match_transfers


def _rows(arrays):
    src, dst, elements, reduce, ks, kd = (np.asarray(a) for a in arrays)
    return sorted(zip(src.tolist(), dst.tolist(), elements.tolist(), reduce.tolist(), ks.tolist(), kd.tolist()))


@pytest.mark.parametrize("algo", ["ring", "ps", "ps:servers=3", "ps:servers=1", "butterfly", "butterfly:order=far",
                                  "recursive-doubling"])
@pytest.mark.parametrize("p", [2, 3, 5, 6, 8, 13, 24, 64, 100])
@pytest.mark.parametrize("count", [64, 1001, 4096])
def test_rounds_equal_the_schedule(algo, p, count):
    if algo.endswith("=3") and p < 3:
        pytest.skip("3 servers need 3 ranks")
    arrays = rounds("allreduce", algo, p, count)
    if arrays is None:
        pytest.skip("no array form here")
    got = [np.concatenate(col) for col in zip(*arrays)]
    tx = match_transfers(build_schedule("allreduce", algo, p, count))
    want = (tx.src, tx.dst, tx.elements, tx.reduce, tx.src_step, tx.dst_step)
    assert _rows(got) == _rows(want)


def test_no_array_form_when_chunks_would_be_empty():
    assert rounds("allreduce", "ring", 8, 5) is None
    assert rounds("allreduce", "butterfly", 24, 15) is None
    assert rounds("allreduce", "chain", 8, 5000) is None
