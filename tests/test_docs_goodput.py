"""docs/goodput.md's figures, re-computed by the commands it names. What the goodput model alone decides
(interruptions, the checkpoint, the choices bought) must read as the page prints it; what also rides on the
simulated step (tokens/s, an interval in whole steps, dollars per token/s) within 1 %, so that a change that
moves a figure materially fails here until the page says the new figure."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabriclab.cli.main import app

PAGE = (Path(__file__).resolve().parents[1] / "docs" / "goodput.md").read_text()
LLAMA3 = ["whatif", "llm", "--model", "llama3-405b", "--cluster", "dgx-h100", "--gpus", "16384", "--tp", "8", "--pp",
          "16", "--seq", "8192", "--gbs", "2048", "--recompute", "full"]
PLAN = ["plan", "--model", "llama3-405b", "--gpus", "65536", "--clusters", "dgx-h100", "--tp", "8", "--pp", "16",
        "--seq", "8192", "--rank", "goodput"]


def _run(tmp_path: Path, args: list[str]) -> dict:
    out = tmp_path / f"r{len(list(tmp_path.iterdir()))}.json"
    done = CliRunner().invoke(app, [*args, "--json", str(out)], env={"COLUMNS": "80", "FABRICLAB_STORE": "off"})
    assert done.exit_code == 0, done.output[-2000:]
    return json.loads(out.read_text())["results"]


def _number(text: str) -> float:
    return float(text.replace(",", "").replace("$", "").replace("%", "").strip())


def test_the_llama3_check_reads_as_the_page_prints_it(tmp_path):
    r = _run(tmp_path, LLAMA3)
    quoted = PAGE[PAGE.index("goodput (llama3 failure rates"):]
    quoted = " ".join(quoted[:quoted.index("```")].split())
    assert f"{r['interruptions_per_day']:.3g} interruptions a day, {r['unexpected_per_day']:.3g} unexpected" in quoted
    assert f"one unexpected every {r['mttf_s'] / 3600:.3g} h" in quoted
    assert f"training pauses {r['checkpoint_pause_s']:.3g} s" in quoted
    assert f"effective training time {r['effective_training_time']:.1%}" in quoted
    good, step = re.search(r"goodput ([\d,]+) tokens/s of the step's ([\d,]+)", quoted).groups()
    assert _number(good) == pytest.approx(r["goodput_tokens_per_s"], rel=0.01)
    assert _number(step) == pytest.approx(r["tokens_per_s"], rel=0.01)
    assert f"| unexpected interruptions a day | 419 / 54 = 7.76 | {r['unexpected_per_day']:.2f} |" in PAGE
    rsc1 = _run(tmp_path, [*LLAMA3, "--failure-rates", "rsc1"])
    assert f"stop {rsc1['unexpected_per_day']:.1f} times a day" in PAGE
    assert f"effective training time {rsc1['effective_training_time']:.1%}".replace("%", " %") in PAGE


def test_the_dual_tor_decision_at_65536_gpus_is_the_pages(tmp_path):
    row = _run(tmp_path, PLAN)["rows"][0]
    _, one, two = row["resilience_options"]
    assert row["dual_tor"] and (one["choice"], two["choice"]) == ("single ToR", "dual ToR")
    for label, o in (("one ToR", one), ("two ToRs", two)):
        cells = [c.strip(" *") for c in PAGE[PAGE.index(f"| {label} |"):].splitlines()[0].split("|")[2:-1]]
        assert cells[:3] == [f"{o['spare_servers']}", f"${o['extra_usd'] / 1e6:.1f}M",
                             f"{o['effective_training_time']:.2%}".replace("%", " %")]
        assert _number(cells[3]) == pytest.approx(o["goodput_tokens_per_s"], rel=0.01)
        assert _number(cells[4]) == pytest.approx(o["usd_per_goodput_token_per_s"], rel=0.01)
    assert f"${row['cluster_usd'] / 1e6:,.1f}M" in PAGE
