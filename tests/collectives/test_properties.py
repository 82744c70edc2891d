"""Property tests: random rank counts, sizes, roots, group sizes, chunk and server counts."""

from hypothesis import given, settings, strategies as st

from fabriclab.collectives.hierarchical import LEVELS
from fabriclab.collectives.registry import build_schedule
from fabriclab.collectives.schedule import Schedule
from fabriclab.collectives.verify import verify

ranks = st.integers(min_value=1, max_value=40)
counts = st.integers(min_value=0, max_value=5000)


@settings(max_examples=150, deadline=None)
@given(p=ranks, count=counts, root=st.integers(0, 39), group=st.integers(1, 45),
       chunks=st.integers(1, 9), lower=st.sampled_from(LEVELS), upper=st.sampled_from(LEVELS),
       collective=st.sampled_from(["allreduce", "reduce", "broadcast"]))
def test_hierarchical_any_shape(p, count, root, group, chunks, lower, upper, collective):
    spec = f"hierarchical:lower={lower}:upper={upper}:group={group}:chunks={chunks}"
    s = build_schedule(collective, spec, p, count, root % p)
    assert verify(s).ok


@settings(max_examples=150, deadline=None)
@given(p=ranks, count=counts, chunks=st.integers(1, 12),
       algo=st.sampled_from(["chain", "binomial", "double-binary-tree"]))
def test_pipelined_any_chunks(p, count, chunks, algo):
    assert verify(build_schedule("allreduce", f"{algo}:chunks={chunks}", p, count)).ok


@settings(max_examples=100, deadline=None)
@given(p=ranks, count=counts, data=st.data())
def test_parameter_server_any_servers(p, count, data):
    servers = data.draw(st.integers(1, p))
    assert verify(build_schedule("allreduce", f"ps:servers={servers}", p, count)).ok


@settings(max_examples=100, deadline=None)
@given(p=ranks, count=counts, algo=st.sampled_from(["ring", "recursive", "direct"]),
       collective=st.sampled_from(["reduce_scatter", "allgather"]))
def test_scatter_gather_any_shape(p, count, algo, collective):
    assert verify(build_schedule(collective, algo, p, count)).ok


@settings(max_examples=60, deadline=None)
@given(p=ranks, count=counts, algo=st.sampled_from(["ring", "butterfly", "rd", "direct", "dbtree", "cb"]))
def test_json_round_trip(p, count, algo):
    s = build_schedule("allreduce", algo, p, count)
    again = Schedule.from_json(s.to_json())
    assert again == s and verify(again).ok


@settings(max_examples=60, deadline=None)
@given(p=st.integers(2, 40), count=st.integers(1, 5000))
def test_ring_moves_the_textbook_bytes(p, count):
    s = build_schedule("allreduce", "ring", p, count)
    # Every element leaves P-1 ranks twice: 2(P-1)/P of the buffer per rank on average.
    assert s.total_elements_sent() == 2 * (p - 1) * count
