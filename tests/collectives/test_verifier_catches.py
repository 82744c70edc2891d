"""The verifier rejects broken schedules: each test breaks a correct one in one way."""

from dataclasses import replace

from fabriclab.collectives.registry import build_schedule
from fabriclab.collectives.schedule import RECV_COPY, RECV_REDUCE, SEND, Builder, Op, Schedule
from fabriclab.collectives.verify import verify


def _edit(s: Schedule, rank: int, step: int, index: int, op: Op | None) -> Schedule:
    steps = [list(map(list, r)) for r in s.steps]
    if op is None:
        del steps[rank][step][index]
    else:
        steps[rank][step][index] = op
    return replace(s, steps=tuple(tuple(tuple(x) for x in r if x) for r in steps))


def test_correct_ring_passes():
    assert verify(build_schedule("allreduce", "ring", 4, 8)).ok


def test_missing_contribution_is_reported():
    b = Builder(3, 6)
    # Rank 1 reduces rank 0's data only; rank 2 never takes part.
    b.step(0).send(1, (0, 6))
    b.step(1).recv_reduce(0, (0, 6))
    result = verify(b.build("reduce", "broken", root=1))
    assert not result.ok and "needs {0,1,2}" in result.errors[0]


def test_double_count_is_reported():
    s = build_schedule("allreduce", "ring", 3, 6)
    # Turn the first allgather copy of rank 0 into a reduce: that block then counts everyone twice.
    step = len(s.steps[0]) - 2
    op = next(o for o in s.steps[0][step] if o.kind == RECV_COPY)
    idx = s.steps[0][step].index(op)
    result = verify(_edit(s, 0, step, idx, Op(RECV_REDUCE, op.peer, op.chunk)))
    assert not result.ok and "twice" in " ".join(result.errors)


def test_deadlock_is_reported():
    b = Builder(2, 4)
    b.step(0).recv_copy(1, (0, 4))
    b.step(0).send(1, (0, 4))
    b.step(1).recv_copy(0, (0, 4))
    b.step(1).send(0, (0, 4))
    result = verify(b.build("allreduce", "broken"))
    assert not result.ok and "deadlock" in result.errors[0]


def test_chunk_mismatch_is_reported():
    s = build_schedule("allreduce", "ring", 2, 4)
    op = s.steps[0][0][0]
    assert op.kind == SEND
    other = 1 - op.chunk
    result = verify(_edit(s, 0, 0, 0, Op(SEND, op.peer, other)))
    assert not result.ok and "names chunk" in " ".join(result.errors)


def test_send_of_data_not_held_is_reported():
    b = Builder(3, 4)
    b.step(1).send(2, (0, 4))
    b.step(2).recv_copy(1, (0, 4))
    b.step(0).send(1, (0, 4))
    b.step(1).recv_copy(0, (0, 4))
    result = verify(b.build("broadcast", "broken", root=0))
    assert not result.ok and "does not hold" in result.errors[0]


def test_unmatched_send_is_reported():
    s = build_schedule("broadcast", "binomial", 4, 4)
    rank = next(r for r in range(4) if any(o.kind != SEND for o in s.ops(r)))
    step = next(i for i, st in enumerate(s.steps[rank]) if any(o.kind != SEND for o in st))
    idx = next(i for i, o in enumerate(s.steps[rank][step]) if o.kind != SEND)
    assert not verify(_edit(s, rank, step, idx, None)).ok


def test_peer_out_of_range_is_reported():
    s = build_schedule("allreduce", "ring", 2, 4)
    op = s.steps[0][0][0]
    result = verify(_edit(s, 0, 0, 0, Op(op.kind, 5, op.chunk)))
    assert not result.ok and "peer 5" in result.errors[0]


def test_reduce_scatter_checks_every_element_of_each_block():
    # One chunk spans both blocks: rank 1 would need the second half reduced, but only rank 0 gets it.
    b = Builder(2, 4)
    b.step(1).send(0, (0, 4))
    b.step(0).recv_reduce(1, (0, 4))
    result = verify(b.build("reduce_scatter", "broken"))
    assert not result.ok and "rank 1" in result.errors[0]
