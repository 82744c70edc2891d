"""ParallelConfig's groups against a rank-by-rank oracle, and its errors."""

import pytest

from fabriclab.workload.parallel import DIMENSIONS, ParallelConfig


def groups_rank_by_rank(par: ParallelConfig, communicator: str) -> list[list[int]]:
    """The naive oracle: walk the ranks, key each by the coordinates its group shares."""
    coords = par.coordinates()
    found: dict[tuple, list[tuple[int, int]]] = {}
    for rank in range(par.num_gpus):
        c = {d: int(coords[d][rank]) for d in DIMENSIONS}
        if communicator == "ep":
            plane = c["dp"] * par.cp + c["cp"]
            key, within = (c["tp"], c["pp"], plane // par.ep), plane % par.ep
        else:
            key, within = tuple(c[d] for d in DIMENSIONS if d != communicator), c[communicator]
        found.setdefault(key, []).append((within, rank))
    return [[r for _, r in sorted(members)] for _, members in sorted(found.items())]


@pytest.mark.parametrize("kw", [dict(num_gpus=24, tp=2, pp=3), dict(num_gpus=64, tp=2, pp=2, cp=2, ep=4),
                                dict(num_gpus=48, tp=4, cp=3, order="dp-tp-cp-pp"),
                                dict(num_gpus=32, tp=1, pp=4, cp=2, ep=2, order="cp-tp-pp-dp")])
def test_groups_are_the_groups_rank_by_rank(kw):
    par = ParallelConfig(gbs=48, seq=48, **kw)
    for communicator in ("tp", "cp", "ep", "dp", "pp"):
        assert par.groups(communicator) == groups_rank_by_rank(par, communicator)


def test_megatron_placement_and_errors():
    par = ParallelConfig(num_gpus=128, tp=4, pp=8, vp=6, gbs=256, seq=2048)
    assert par.dp == 4 and par.num_microbatches == 64
    assert par.groups("dp")[0] == [0, 4, 8, 12] and par.groups("pp")[0] == list(range(0, 128, 16))
    with pytest.raises(ValueError, match="multiple of tp x cp x pp"):
        ParallelConfig(num_gpus=10, tp=4, gbs=8, seq=8)
    with pytest.raises(ValueError, match="communicator 'xx'"):
        par.groups("xx")
