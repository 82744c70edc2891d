"""Pipeline schedules against their closed forms and Megatron's orders."""

import pytest

from fabriclab.whatif.llm.schedule import B, F, order, simulate


@pytest.mark.parametrize("pp,m", [(1, 1), (1, 5), (2, 4), (4, 8), (8, 8), (4, 16), (3, 7)])
def test_1f1b_takes_the_closed_form(pp, m):
    f, b = 1.0, 2.0
    run = simulate(pp, 1, m, [[f]] * pp, [[b]] * pp, 0.0)
    assert max(run.stage_end_s) == pytest.approx((m + pp - 1) * (f + b))


@pytest.mark.parametrize("pp,vp,m", [(2, 2, 4), (4, 2, 8), (4, 3, 8), (8, 6, 64)])
def test_interleaving_divides_the_bubble_by_vp(pp, vp, m):
    # Narayanan et al.: bubble (p - 1) (f + b) / v for chunks of 1/v of a stage
    f, b = 1.0 / vp, 2.0 / vp
    run = simulate(pp, vp, m, [[f] * vp] * pp, [[b] * vp] * pp, 0.0)
    ideal = m * vp * (f + b)
    assert max(run.stage_end_s) == pytest.approx(ideal + (pp - 1) * (f + b))


def test_every_pass_runs_once_and_after_its_dependencies():
    pp, vp, m = 4, 2, 8
    run = simulate(pp, vp, m, [[1.0, 1.5]] * pp, [[2.0, 2.5]] * pp, 0.1)
    ends = {}
    for s in range(pp):
        assert sorted(run.ops[s]) == sorted((k, c, mb) for k in (F, B) for c in range(vp) for mb in range(m))
        for (k, c, mb), t0, t1 in zip(run.ops[s], run.start_s[s], run.end_s[s]):
            ends[(k, s, c, mb)] = (t0, t1)
    for (k, s, c, mb), (t0, _) in ends.items():
        if k == F and s > 0:
            assert t0 >= ends[(F, s - 1, c, mb)][1] + 0.1 - 1e-12
        if k == B and s < pp - 1:
            assert t0 >= ends[(B, s + 1, c, mb)][1] + 0.1 - 1e-12


def test_send_time_lengthens_the_pipeline_not_a_single_stage():
    quiet = simulate(4, 1, 8, [[1.0]] * 4, [[2.0]] * 4, 0.0)
    loud = simulate(4, 1, 8, [[1.0]] * 4, [[2.0]] * 4, 0.5)
    one = simulate(1, 1, 8, [[1.0]], [[2.0]], 0.5)
    assert max(loud.stage_end_s) > max(quiet.stage_end_s)
    assert max(one.stage_end_s) == pytest.approx(24.0)


def test_the_warmup_of_the_first_stage_is_pp_minus_one_forwards():
    ops = order(4, 1, 8, 0)
    assert [k for k, _, _ in ops[:4]] == [F, F, F, F] and ops[4][0] == B
    last = order(4, 1, 8, 3)
    assert [k for k, _, _ in last[:2]] == [F, B]
