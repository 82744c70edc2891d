"""The executor's plan and the FIFO matching, without torch: segments follow op order per peer, both ends
of every matched message cut the same element range, and inconsistent schedules are refused."""

import pytest
from hypothesis import given, settings, strategies as st

from fabriclab.collectives import registry
from fabriclab.collectives.matching import compile_plan, match_messages
from fabriclab.collectives.schedule import Builder, split_counts
from fabriclab.sim.collective import match_transfers


def test_plan_keeps_fifo_order_and_bounds_temporaries():
    schedule = registry.build_schedule("allreduce", "ring", 4, 1001)
    plan = compile_plan(schedule, 1, 7)
    for peer in range(4):
        sent = [(s.start, s.stop) for s in plan.segments if s.is_send and s.peer == peer]
        ops = [schedule.chunks[op.chunk] for op in schedule.ops(1) if op.kind == "send" and op.peer == peer]
        assert sent == [(o + a, o + min(n, a + 7)) for o, n in ops for a in range(0, n, 7)]
    temps = [s for s in plan.segments if s.tmp >= 0]
    assert temps and max(s.tmp + s.stop - s.start for s in temps) <= plan.temp_elements
    assert plan.temp_elements <= 2 * max(split_counts(1001, 4))


@settings(max_examples=60, deadline=None)
@given(p=st.integers(1, 12), count=st.integers(0, 300), segment=st.integers(1, 40),
       algo=st.sampled_from(["ring", "butterfly", "binomial:chunks=3", "chain:chunks=2", "direct",
                             "hierarchical:lower=chain:upper=binomial:group=3", "dbtree"]))
def test_matched_segments_cover_the_same_elements(p, count, segment, algo):
    schedule = registry.build_schedule("allreduce", algo, p, count)
    plans = [compile_plan(schedule, r, segment) for r in range(p)]
    messages = [(r, s.peer, s.is_send, s) for r, plan in enumerate(plans) for s in plan.segments]
    matched = match_messages(messages)
    assert sum(len(out) for _, out, _ in matched) == sum(1 for m in messages if m[2])
    for (a, b), out, into in matched:
        assert a != b and all(s.peer == b for s in out) and all(s.peer == a for s in into)
        assert [(s.start, s.stop) for s in out] == [(s.start, s.stop) for s in into]
        assert all(0 < s.stop - s.start <= segment for s in out)


def test_match_messages_pairs_fifo_in_order_of_first_send():
    messages = [(1, 0, True, "b0"), (0, 1, True, "a0"), (1, 0, False, "x"), (0, 1, True, "a1"),
                (1, 0, True, "b1"), (0, 1, False, "y0"), (0, 1, False, "y1"), (1, 0, False, "z")]
    assert match_messages(messages) == [((1, 0), ["b0", "b1"], ["y0", "y1"]), ((0, 1), ["a0", "a1"], ["x", "z"])]


def test_match_messages_refuses_unpaired_sends_and_receives():
    with pytest.raises(ValueError, match="rank 0 sends 2 messages to rank 1, which receives 1"):
        match_messages([(0, 1, True, 0), (0, 1, True, 1), (1, 0, False, 0)])
    with pytest.raises(ValueError, match="rank 2 sends 0 messages to rank 0, which receives 1"):
        match_messages([(0, 2, False, 0)])


def test_an_inconsistent_schedule_is_refused_by_the_simulator_too():
    b = Builder(2, 4)
    b.step(0).send(1, (0, 4))
    b.step(1).recv_reduce(0, (0, 4)).recv_reduce(0, (0, 4))
    with pytest.raises(ValueError, match="rank 0 sends 1 messages to rank 1, which receives 2"):
        match_transfers(b.build("allreduce", "broken"))
