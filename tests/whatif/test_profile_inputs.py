"""Profiles and add-cost tables: malformed files get the file and line."""

import pytest

from fabriclab.workload.addcost import AddCost
from fabriclab.workload.profile import load_profile, read_bk_log, write_bk_log

HEADER = "comment\n1\n"


@pytest.mark.parametrize("body, message", [
    ("", "empty or truncated"),
    (HEADER + "2\n10,4\n", "line 3 says 2 rows but the file has 1"),
    (HEADER + "1\n10\n", ":4: expected two columns"),
    (HEADER + "1\n-3,4\n", ":4: negative value"),
    (HEADER + "1\nabc,4\n", ":4: wait_us must be a number"),
    ("comment\nx\n1\n1,2\n", ":2: the number of batches must be a whole number"),
])
def test_malformed_bk_logs(tmp_path, body, message):
    path = tmp_path / "m.bk.log"
    path.write_text(body)
    with pytest.raises(ValueError, match=message):
        read_bk_log(path, iteration_s=0.1)


def test_bk_log_round_trip(tmp_path):
    p = load_profile("resnet50")
    again = read_bk_log(write_bk_log(p, tmp_path / "r.bk.log"), iteration_s=p.iteration_s)
    assert [g.size_bytes for g in again.grads] == [g.size_bytes for g in p.grads]
    assert again.backward_s == pytest.approx(p.backward_s, rel=1e-12)
    assert round(p.backward_s * 1e3, 2) == 64.81 and round(p.param_bytes / 1e6, 2) == 102.23


def test_json_profiles_and_errors(tmp_path):
    p = load_profile("vgg16")
    path = tmp_path / "v.json"
    path.write_text(p.to_json())
    assert load_profile(str(path)) == p
    (tmp_path / "e.json").write_text("")
    with pytest.raises(ValueError, match="empty profile file"):
        load_profile(str(tmp_path / "e.json"))
    (tmp_path / "bad.json").write_text('{"model": 1}')
    with pytest.raises(ValueError, match="bad.json: not a fabriclab profile"):
        load_profile(str(tmp_path / "bad.json"))
    with pytest.raises(ValueError, match="neither a built-in V100 profile"):
        load_profile("resnet9000")


def test_add_cost_table_errors(tmp_path):
    (tmp_path / "a.log").write_text("40,1e-5\nx,y\n")
    with pytest.raises(ValueError, match="a.log:2: expected `bytes,seconds`"):
        AddCost.from_log(tmp_path / "a.log")
