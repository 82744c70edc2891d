"""Specs, aliases and parameter errors."""

import pytest

from fabriclab.collectives.registry import build_schedule, describe, parse_spec


def test_aliases_resolve_to_canonical_specs():
    assert build_schedule("allreduce", "cb", 8, 16).algorithm == \
        "hierarchical:lower=chain:upper=binomial:group=4:chunks=4"
    assert build_schedule("allreduce", "rhd", 8, 16).algorithm == "butterfly:order=near"
    assert build_schedule("allreduce", "ps", 16, 16).algorithm == "parameter-server:servers=2"


@pytest.mark.parametrize("collective, spec, message", [
    ("allreduce", "bogus", "unknown allreduce algorithm 'bogus': use one of ring"),
    ("allgather", "chain", "unknown allgather algorithm"),
    ("allreduce", "chain:chunks=0", "chunks=0 must be >= 1"),
    ("allreduce", "chain:chunks=x", "chunks=x is not a whole number"),
    ("allreduce", "chain:size=3", "chain takes chunks="),
    ("allreduce", "ps:servers=9", "servers=9 exceeds the 8 ranks"),
    ("allreduce", "hier:lower=star", "lower=star is not valid: use one of chain"),
    ("allreduce", "hier:group=0", "group=0 must be >= 1"),
    ("gather", "ring", "unknown collective 'gather'"),
])
def test_bad_specs_say_what_is_accepted(collective, spec, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_spec(collective, spec, 8)


def test_bad_sizes_and_roots():
    with pytest.raises(ValueError, match="root 4 is out of range for 4 ranks: use 0..3"):
        build_schedule("reduce", "binomial", 4, 10, root=4)
    with pytest.raises(ValueError, match="ranks must be >= 1"):
        build_schedule("allreduce", "ring", 0, 10)


def test_describe_lists_every_algorithm():
    names = [row[0] for row in describe("allreduce")]
    assert {"ring", "butterfly", "recursive-doubling", "binomial", "chain", "double-binary-tree",
            "direct", "parameter-server", "hierarchical"} <= set(names)


def test_root_is_ignored_by_unrooted_collectives():
    from fabriclab.collectives.verify import verify

    for collective in ("allreduce", "reduce_scatter", "allgather"):
        s = build_schedule(collective, "ring", 5, 23, root=3)
        assert s.root == 0 and verify(s).ok
        assert s == build_schedule(collective, "ring", 5, 23)


def test_parameters_relative_to_the_rank_count():
    assert parse_spec("allreduce", "ps:servers=P/8", 64)[1]["servers"] == 8
    assert parse_spec("allreduce", "ps:servers=P/8", 5)[1]["servers"] == 1
    assert parse_spec("allreduce", "hier:group=P", 12)[1]["group"] == 12
    with pytest.raises(ValueError, match="or P, P/k"):
        parse_spec("allreduce", "ps:servers=Q/2", 8)
