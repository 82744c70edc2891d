"""Compute/communication overlap in the stencil simulation: a step is max(f C, exchange) + (1 - f) C."""

import pytest

from fabriclab.fabric import star
from fabriclab.sim.stencil import StencilWorkload, decompose, simulate_stencil

B = 1e9


@pytest.mark.parametrize("fraction, compute_per_cell_s", [(0.5, 1e-6), (0.75, 1e-6), (0.75, 1e-9), (1.0, 1e-8)])
def test_overlapped_step_on_a_star(fraction, compute_per_cell_s):
    cells, ranks = (8, 8, 8), 8
    work = StencilWorkload(cells=cells, compute_per_cell_s=compute_per_cell_s, bytes_per_face_cell=8, steps=3,
                           overlap_fraction=fraction)
    sim = simulate_stencil(work, ranks, star(hosts=ranks, link=f"{B}B/s@0us"))
    grid = decompose(ranks, cells)
    exchange = sum(grid.face_cells(d) * 8 for d, _, _ in grid.messages(0)) / B
    compute = grid.cells_per_rank * compute_per_cell_s
    assert sim.step_s == pytest.approx(max(fraction * compute, exchange) + (1 - fraction) * compute, rel=1e-9)
    assert sim.comm_s == pytest.approx(max(exchange - fraction * compute, 0.0), rel=1e-9, abs=1e-15)


def test_no_overlap_is_the_default_and_unchanged():
    work = StencilWorkload(cells=(8, 8, 8), compute_per_cell_s=1e-6, bytes_per_face_cell=8)
    assert work.overlap_fraction == 0.0
    sim = simulate_stencil(work, 8, star(hosts=8, link=f"{B}B/s@0us"))
    assert sim.step_s == pytest.approx(64e-6 + 3 * 2 * 16 * 8 / B)


def test_overlap_fraction_outside_0_1_is_refused():
    with pytest.raises(ValueError, match="overlap fraction"):
        StencilWorkload(cells=(8, 8, 8), compute_per_cell_s=1e-6, overlap_fraction=1.5)
