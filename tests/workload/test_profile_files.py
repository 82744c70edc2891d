"""Malformed profile files (`.bk.log`, profile JSON, add-cost logs) give one message naming the file
and, where there is one, the line."""

import json

import pytest

from fabriclab.workload.addcost import AddCost
from fabriclab.workload.profile import GradReady, Profile, load_profile, read_bk_log, write_bk_log

HEADER = "first line is a comment\n1\n"


@pytest.mark.parametrize("body, where, message", [
    ("", "", "empty or truncated"),
    ("comment only\n", "", "empty or truncated"),
    (HEADER + "2\n10,400\n", "", "line 3 says 2 rows but the file has 1"),
    (HEADER + "1\n10,400\n20,400\n", "", "line 3 says 1 rows but the file has 2"),
    (HEADER + "1\n10\n", ":4", "expected two columns `wait_us,param_bytes`"),
    (HEADER + "2\n10,400\n10,400,3\n", ":5", "expected two columns"),
    (HEADER + "1\n-3,400\n", ":4", "negative value"),
    (HEADER + "1\n3,-400\n", ":4", "negative value"),
    (HEADER + "1\nfast,400\n", ":4", "wait_us must be a number, got 'fast'"),
    (HEADER + "1\n3,big\n", ":4", "param_bytes must be a number"),
    (HEADER + "2\n3,400\nnan,400\n", ":5", "wait_us must be a finite number, got 'nan'"),
    (HEADER + "1\n3,inf\n", ":4", "param_bytes must be a finite number"),
    ("comment\none\n1\n1,2\n", ":2", "the number of batches must be a whole number"),
    (HEADER + "x\n1,2\n", ":3", "the number of rows must be a whole number"),
])
def test_malformed_bk_log(tmp_path, body, where, message):
    path = tmp_path / "bad.bk.log"
    path.write_text(body)
    with pytest.raises(ValueError) as info:
        read_bk_log(path, iteration_s=0.1)
    assert str(info.value).startswith(f"{path}{where}:")
    assert message in str(info.value)


def test_missing_bk_log(tmp_path):
    with pytest.raises(ValueError, match="cannot read"):
        read_bk_log(tmp_path / "none.bk.log", iteration_s=0.1)


def good_profile() -> Profile:
    grads = (GradReady(name="fc.bias", size_bytes=4000, ready_s=0.001),
             GradReady(name="fc.weight", size_bytes=8_192_000, ready_s=0.0012))
    return Profile(model="m", device="cpu", batch_size=2, iteration_s=0.1, grads=grads, extra={"k": [1, 2]})


def test_good_files_round_trip(tmp_path):
    profile = good_profile()
    path = tmp_path / "m.json"
    path.write_text(profile.to_json())
    assert load_profile(str(path)) == Profile.from_json(profile.to_json(), source=str(path)) == profile
    again = read_bk_log(write_bk_log(profile, tmp_path / "m.bk.log"), iteration_s=0.1, batch_size=2)
    assert [g.ready_s for g in again.grads] == pytest.approx([0.001, 0.0012], rel=1e-12)


@pytest.mark.parametrize("edit, message", [
    (lambda text: text.replace('"model"', '"model" "x"', 1), "line 2"),  # broken JSON: its line and column
    (lambda text: text[: len(text) // 2], "line"),
    (lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "grads"}), "'grads'"),
    (lambda text: json.dumps({**json.loads(text), "colour": "red"}), "colour"),
    (lambda text: json.dumps({**json.loads(text), "iteration_s": -1}), "iteration_s must be > 0"),
    (lambda text: text.replace("8192000", "-8192000"), "gradient 1 (fc.weight) has negative bytes"),
    (lambda text: text.replace("0.0012", "0.0001"), "before the previous one"),
    (lambda text: text.replace("0.0012", "NaN"), ":15: NaN is not a finite number"),
    (lambda text: text.replace('"iteration_s": 0.1', '"iteration_s": Infinity'), ":5: Infinity is not a finite"),
    (lambda text: text.replace("8192000", "1e999"), ":14: 1e999 is not a finite number"),
])
def test_malformed_profile_json(tmp_path, edit, message):
    path = tmp_path / "bad.json"
    path.write_text(edit(good_profile().to_json()))
    with pytest.raises(ValueError) as info:
        load_profile(str(path))
    assert str(info.value).startswith(f"{path}:")
    assert message in str(info.value)


def test_empty_profile_json(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text("")
    with pytest.raises(ValueError, match=f"{path}: empty profile file"):
        load_profile(str(path))


@pytest.mark.parametrize("body, message", [
    ("40,1e-5\n80\n", ":2: expected `bytes,seconds`"),
    ("40,1e-5\n80,slow\n", ":2: expected `bytes,seconds`"),
    ("40,-1e-5\n", ":1: negative value"),
    ("", "empty add-cost table"),
])
def test_malformed_add_cost_log(tmp_path, body, message):
    path = tmp_path / "add.log"
    path.write_text(body)
    with pytest.raises(ValueError) as info:
        AddCost.from_log(path)
    assert str(info.value).startswith(str(path)) and message in str(info.value)
