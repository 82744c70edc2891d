"""ParallelConfig's groups against a rank-by-rank oracle, and its errors."""

import pytest

from fabriclab.workload.parallel import DIMENSIONS, ParallelConfig


def expert_place(par: ParallelConfig, rank: int) -> dict[str, int]:
    """The naive oracle of the experts' grid (Megatron-Core's rank generator): the job's order with cp
    dropped and ep put just inside dp, walked one rank at a time."""
    sizes = {"etp": par.etp, "ep": par.ep, "edp": par.edp, "pp": par.pp}
    order = [e for d in par.order.split("-") for e in {"tp": ["etp"], "cp": [], "dp": ["ep", "edp"], "pp": ["pp"]}[d]]
    place, rest = {}, rank
    for dim in order:
        place[dim], rest = rest % sizes[dim], rest // sizes[dim]
    return place


def groups_rank_by_rank(par: ParallelConfig, communicator: str) -> list[list[int]]:
    """The naive oracle: walk the ranks, key each by the coordinates its group shares."""
    coords = par.coordinates()
    found: dict[tuple, list[tuple[int, int]]] = {}
    for rank in range(par.num_gpus):
        c = {d: int(coords[d][rank]) for d in DIMENSIONS}
        e = expert_place(par, rank)
        if communicator in ("ep", "etp", "edp"):
            key = tuple(e[d] for d in ("etp", "ep", "edp", "pp") if d != communicator)
            within = e[communicator]
        elif communicator == "etpep":
            key, within = (e["edp"], e["pp"]), e["etp"] + par.etp * e["ep"]
        else:
            key, within = tuple(c[d] for d in DIMENSIONS if d != communicator), c[communicator]
        found.setdefault(key, []).append((within, rank))
    return [[r for _, r in sorted(members)] for _, members in sorted(found.items())]


@pytest.mark.parametrize("kw", [dict(num_gpus=24, tp=2, pp=3), dict(num_gpus=64, tp=2, pp=2, cp=2, ep=4),
                                dict(num_gpus=48, tp=4, cp=3, order="dp-tp-cp-pp"),
                                dict(num_gpus=32, tp=1, pp=4, cp=2, ep=2, order="dp-cp-tp-pp"),
                                dict(num_gpus=64, tp=2, pp=2, cp=2, ep=4, etp=2),
                                dict(num_gpus=48, tp=4, pp=2, ep=6, order="tp-pp-cp-dp", etp=4)])
def test_groups_are_the_groups_rank_by_rank(kw):
    par = ParallelConfig(gbs=48, seq=48, **kw)
    for communicator in ("tp", "cp", "ep", "dp", "pp", "etp", "edp", "etpep"):
        assert par.groups(communicator) == groups_rank_by_rank(par, communicator)


def test_experts_fold_over_the_stage_as_megatron_core_places_them():
    # TP2 with EP16 on 16 GPUs: attention TP2 x DP8, experts ETP1 x EP16 (EP16 does not divide DP8 x CP1,
    # the rule before folding); with EP8 the expert groups are runs of 8 ranks, over TP's ranks too
    par = ParallelConfig(num_gpus=16, tp=2, ep=16, gbs=16, seq=64)
    assert par.edp == 1 and par.groups("ep") == [list(range(16))]
    par = ParallelConfig(num_gpus=16, tp=2, ep=8, gbs=16, seq=64)
    assert par.groups("ep") == [list(range(8)), list(range(8, 16))]
    assert par.groups("edp")[0] == [0, 8]
    # ETP = TP keeps the layout before folding: EP groups over the dp x cp plane, one per TP rank
    par = ParallelConfig(num_gpus=32, tp=2, cp=2, ep=4, etp=2, gbs=16, seq=64)
    assert par.groups("ep")[0] == [0, 2, 4, 6] and par.groups("etp")[0] == [0, 1]
    assert par.groups("etpep")[0] == list(range(8)) and par.groups("edp")[0] == [0, 8, 16, 24]
    # a pipeline stage holds both grids: PP groups are the same
    par = ParallelConfig(num_gpus=64, tp=2, pp=4, ep=16, gbs=64, seq=64)
    assert {r // 16 for g in par.groups("ep") for r in g} == {0, 1, 2, 3}
    assert all(len({r // 16 for r in g}) == 1 for g in par.groups("ep"))


def test_folding_errors_say_what_to_change():
    with pytest.raises(ValueError, match=r"--etp 1 x --ep 32 = 32 must divide tp x cp x dp = 2 x 1 x 8 = 16 .* "
                                         r"use --ep 2, 4, 8, 16 with --etp 1"):
        ParallelConfig(num_gpus=16, tp=2, ep=32, gbs=16, seq=64)
    with pytest.raises(ValueError, match="put pp last"):
        ParallelConfig(num_gpus=32, tp=2, pp=2, ep=8, order="tp-pp-cp-dp", gbs=32, seq=64)
    with pytest.raises(ValueError, match="add --recompute selective"):
        ParallelConfig(num_gpus=8, gbs=8, seq=64, recompute_modules=("moe_act",))
    with pytest.raises(ValueError, match="--recompute-modules attn: use Megatron-Core's core_attn"):
        ParallelConfig(num_gpus=8, gbs=8, seq=64, recompute="selective", recompute_modules=("attn",))


def test_megatron_placement_and_errors():
    par = ParallelConfig(num_gpus=128, tp=4, pp=8, vp=6, gbs=256, seq=2048)
    assert par.dp == 4 and par.num_microbatches == 64
    assert par.groups("dp")[0] == [0, 4, 8, 12] and par.groups("pp")[0] == list(range(0, 128, 16))
    with pytest.raises(ValueError, match="multiple of tp x cp x pp"):
        ParallelConfig(num_gpus=10, tp=4, gbs=8, seq=8)
    with pytest.raises(ValueError, match="communicator 'xx'"):
        par.groups("xx")
