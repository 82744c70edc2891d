"""The split of a measured step: waits for a group's last member, PP transfers against the bubble."""

import pytest

from fabriclab.runtime.llm.summary import _members, collective_waits, rank_split
from fabriclab.workload.parallel import ParallelConfig


def _step(tp_calls, recvs=(), pp_wait=0.0):
    return {"time_s": {"compute": 1.0, "tp": sum(b - a for _, a, b in tp_calls), "pp": pp_wait}, "inside": {},
            "recvs": list(recvs), "collectives": {"tp": tp_calls, "ep": [], "dp": []}}


def test_a_collective_waits_for_its_groups_last_member_only():
    members = _members(ParallelConfig(num_gpus=2, tp=2, gbs=2, seq=8))
    steps = [_step([("tp.allgather", 0.0, 1.5), ("tp.allgather", 2.0, 2.2)]),
             _step([("tp.allgather", 1.0, 1.5), ("tp.allgather", 2.1, 2.2)])]
    waits = collective_waits(steps, members)
    assert waits[0]["tp"] == pytest.approx(1.1) and waits[1]["tp"] == pytest.approx(0.0)
    split = rank_split(steps[0], {}, 5.0, waits[0])
    assert split["tp"] == pytest.approx(0.6) and split["wait"] == pytest.approx(1.1)
    assert sum(split.values()) == pytest.approx(5.0)


def test_a_receive_is_transfer_from_the_send_on_and_bubble_before():
    # posted at 1.0, the peer sent at 3.0, it arrived at 3.5: 0.5 transfer, 2.0 bubble
    step = _step([], recvs=[(7, 1, 1.0, 3.5)], pp_wait=2.5)
    split = rank_split(step, {(1, 7): 3.0}, 4.0)
    assert split["pp"] == pytest.approx(0.5) and split["bubble"] == pytest.approx(2.0)
