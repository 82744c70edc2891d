"""The stencil's decomposition (grids, neighbours, halo sizes) and its simulation against closed forms."""

import numpy as np
import pytest

from fabriclab.fabric import star
from fabriclab.sim.stencil import (StencilGrid, StencilWorkload, decompose, process_grid, rack_fat_tree,
                                   simulate_stencil, with_message_overhead)

B = 1e9  # link bandwidth of the closed-form tests, bytes per second


@pytest.mark.parametrize("ranks, cells, procs", [
    (1, 16, (1, 1, 1)), (2, 16, (2, 1, 1)), (4, 16, (2, 2, 1)), (8, 16, (2, 2, 2)), (64, 128, (4, 4, 4)),
    (256, 128, (8, 8, 4)), (4096, 128, (16, 16, 16)), (6, 12, (3, 2, 1)),
])
def test_process_grid_is_balanced_and_divides_the_cells(ranks, cells, procs):
    assert process_grid(ranks, (cells,) * 3) == procs


def test_process_grid_follows_a_long_domain():
    # 4 ranks on 64x8x8: cutting x only gives 4 faces of 64 cells, a 2x2 cut 32 + 32 larger ones.
    assert process_grid(4, (64, 8, 8)) == (4, 1, 1)


def test_process_grid_says_what_fits_when_nothing_does():
    with pytest.raises(ValueError, match="3 ranks cannot split 16x16x16 cells into identical blocks"):
        process_grid(3, (16, 16, 16))


def test_neighbours_wrap_around_the_periodic_grid():
    grid = StencilGrid(cells=(8, 8, 8), procs=(4, 2, 1))
    assert grid.coords(7) == (3, 1, 0)
    assert grid.neighbour(7, 0, +1) == grid.rank_of((0, 1, 0)) == 1
    assert grid.neighbour(0, 0, -1) == 6
    assert grid.neighbour(0, 1, -1) == grid.neighbour(0, 1, +1) == 1   # 2 processes: same peer both ways
    assert grid.neighbour(5, 2, +1) == 5                               # 1 process: the rank itself
    assert [(d, s) for d, s, _ in grid.messages(5)] == [(0, -1), (0, 1), (1, -1), (1, 1)]
    for rank in range(grid.num_ranks):  # every message has its mirror image
        for dim, side, peer in grid.messages(rank):
            assert grid.neighbour(peer, dim, -side) == rank


def test_halo_sizes_are_the_faces_of_a_block():
    grid = StencilGrid(cells=(8, 12, 16), procs=(2, 2, 2))
    assert grid.block == (4, 6, 8) and grid.cells_per_rank == 192
    assert [grid.face_cells(d) for d in range(3)] == [48, 32, 24]
    with pytest.raises(ValueError, match="do not divide"):
        StencilGrid(cells=(8, 8, 8), procs=(3, 1, 1))


@pytest.mark.parametrize("ranks, cells", [(2, (8, 8, 8)), (4, (8, 8, 8)), (8, (8, 8, 8)), (8, (16, 8, 4)),
                                          (12, (12, 12, 12))])
def test_simulated_step_is_compute_plus_faces_over_bandwidth_on_a_star(ranks, cells):
    """Zero latency, every rank alike: its uplink carries all its faces, so the exchange takes
    sum(face bytes) / B and a step compute + that."""
    work = StencilWorkload(cells=cells, compute_per_cell_s=1e-6, bytes_per_face_cell=8, steps=3)
    sim = simulate_stencil(work, ranks, star(hosts=ranks, link=f"{B}B/s@0us"))
    grid = decompose(ranks, cells)
    faces = sum(grid.face_cells(d) * 8 for d, _, _ in grid.messages(0))
    compute = grid.cells_per_rank * 1e-6
    assert sim.compute_s == pytest.approx(compute)
    assert sim.comm_s == pytest.approx(faces / B, rel=1e-9)
    assert sim.step_s == pytest.approx(compute + faces / B, rel=1e-9)
    assert sim.num_transfers == 3 * ranks * len(grid.messages(0))


def test_one_rank_does_not_communicate():
    work = StencilWorkload(cells=(8, 8, 8), compute_per_cell_s=1e-6)
    sim = simulate_stencil(work, 1, star(hosts=1, link="1GB/s@1us"))
    assert sim.comm_s == 0 and sim.num_transfers == 0 and sim.step_s == pytest.approx(512e-6)


def test_message_overhead_is_paid_once_per_message():
    work = StencilWorkload(cells=(8, 8, 8), compute_per_cell_s=0.0, bytes_per_face_cell=8, steps=1)
    topology = star(hosts=2, link=f"{B}B/s@1us")
    plain = simulate_stencil(work, 2, topology).step_s
    assert plain == pytest.approx(2e-6 + 2 * 64 * 8 / B)    # two hops, then both x faces share the uplink
    slower = simulate_stencil(work, 2, with_message_overhead(topology, 5e-6)).step_s
    assert slower == pytest.approx(plain + 5e-6)


def test_racks_of_32_nodes_are_the_leaves():
    assert rack_fat_tree(32, "25GbE").name.startswith("star(hosts=32")
    tree = rack_fat_tree(100, "25GbE")                       # 4 whole racks
    assert tree.num_endpoints == 128 and "hosts_per_leaf=32" in tree.name
    assert len(tree.route(0, 31)) == 2 and len(tree.route(0, 32)) == 4
    cores = rack_fat_tree(2560, "OPA100", gpus_per_server=40)  # seed 000: 40 cores per node
    assert cores.num_hosts == 64 and cores.gpus_per_server == 40


def test_the_exchange_slows_down_where_ranks_share_a_nic():
    work = StencilWorkload(cells=(16, 16, 16), compute_per_cell_s=0.0, bytes_per_face_cell=8, steps=1)
    alone = simulate_stencil(work, 8, rack_fat_tree(8, f"{B}B/s@0us", rack_size=8)).step_s
    shared = simulate_stencil(work, 8, rack_fat_tree(8, f"{B}B/s@0us", rack_size=8, gpus_per_server=4)).step_s
    assert shared > alone
    assert np.isfinite(shared)
