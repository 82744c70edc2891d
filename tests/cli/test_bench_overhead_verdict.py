"""`bench overhead`: below its goal on a GPU it prints `missed` and exits 1; on a CPU it says the goal is
for GPUs and does not judge (the measurement itself is replaced here: tests/gpu/test_gpu_overhead.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fabriclab.bench.train import overhead
from fabriclab.cli.main import app


def _fake(ratio):
    def run(config, on_round=None):
        return {"ours_images_per_sec": 87.1, "plain_images_per_sec": 100.0, "ratio": ratio,
                "goal_ratio": overhead.GOAL_RATIO, "rounds": []}
    return run


@pytest.mark.parametrize("device, ratio, code, verdict", [
    ("cuda", 0.871, 1, "missed"), ("cuda", 0.985, 0, "met"), ("cpu", 0.871, 0, "not judged (CPU)")])
def test_the_verdict_and_the_exit_code(monkeypatch, device, ratio, code, verdict):
    monkeypatch.setattr(overhead, "run_overhead", _fake(ratio))
    result = CliRunner().invoke(app, ["bench", "overhead", "--device", device, "--format", "csv"],
                                env={"FABRICLAB_STORE": "off"})
    assert result.exit_code == code, result.output
    header, row = result.stdout.strip().splitlines()[:2]
    assert header.endswith(",goal,verdict") and row.endswith(f",>= 0.97 on a GPU,{verdict}")
    if code:
        assert "missed the goal >= 0.97 on cuda" in result.stderr
    if device == "cpu":
        assert "the goal (>= 0.97) is for a GPU" in result.stderr  # csv owns stdout: the note goes to stderr
