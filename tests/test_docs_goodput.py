"""docs/goodput.md's figures, re-computed by the commands it names: a change to the goodput model that moves one
fails here until the page says the new figure."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from fabriclab.cli.main import app

PAGE = (Path(__file__).resolve().parents[1] / "docs" / "goodput.md").read_text()
LLAMA3 = ["whatif", "llm", "--model", "llama3-405b", "--cluster", "dgx-h100", "--gpus", "16384", "--tp", "8", "--pp",
          "16", "--seq", "8192", "--gbs", "2048", "--recompute", "full"]


def _run(tmp_path: Path, args: list[str]) -> tuple[str, dict]:
    out = tmp_path / f"r{len(list(tmp_path.iterdir()))}.json"
    done = CliRunner().invoke(app, [*args, "--json", str(out)], env={"COLUMNS": "80", "FABRICLAB_STORE": "off"})
    assert done.exit_code == 0, done.output[-2000:]
    return done.output, json.loads(out.read_text())["results"]


def test_the_llama3_check_prints_what_the_page_says(tmp_path):
    printed, r = _run(tmp_path, LLAMA3)
    block = PAGE[PAGE.index("goodput (llama3 failure rates"):]
    block = block[:block.index("```")].strip()
    assert block in printed  # the page quotes the command's lines as they are
    assert f"| unexpected interruptions a day | 419 / 54 = 7.76 | {r['unexpected_per_day']:.2f} |" in PAGE
    assert f"| {r['effective_training_time']:.1%}".replace("%", " %") in PAGE
    _, rsc1 = _run(tmp_path, [*LLAMA3, "--failure-rates", "rsc1"])
    assert f"stop {rsc1['unexpected_per_day']:.1f} times a day" in PAGE
    assert f"effective training time {rsc1['effective_training_time']:.1%}".replace("%", " %") in PAGE


def test_the_dual_tor_decision_at_65536_gpus_is_the_pages(tmp_path):
    _, r = _run(tmp_path, ["plan", "--model", "llama3-405b", "--gpus", "65536", "--clusters", "dgx-h100", "--tp",
                           "8", "--pp", "16", "--seq", "8192", "--rank", "goodput"])
    row = r["rows"][0]
    built, one, two = row["resilience_options"]
    assert row["dual_tor"] and one["choice"] == "single ToR" and two["choice"] == "dual ToR"
    for o in (one, two):
        line = (f"| {o['spare_servers']} | ${o['extra_usd'] / 1e6:.1f}M | {o['effective_training_time']:.2%} | "
                f"{o['goodput_tokens_per_s']:,.0f} |").replace("%", " %")
        assert line in PAGE, line
        assert f"{o['usd_per_goodput_token_per_s']:,.1f}" in PAGE
    assert f"{row['tokens_per_s']:,.0f}" in PAGE and f"${row['cluster_usd'] / 1e6:,.1f}M" in PAGE
