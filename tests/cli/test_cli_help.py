"""Help for every command: no shell-completion options (they edit the user's shell files), no `<bool>`
beside a flag; `collectives list` says what each algorithm does for each collective."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fabriclab.cli.main import COMMANDS, app, load_command

RUNNER = CliRunner()


def _paths() -> list[list[str]]:
    paths = []
    for name in COMMANDS:
        command = load_command(name)
        paths.append([name])
        paths += [[name, sub] for sub in getattr(command, "commands", {})]
    return paths


def test_every_option_is_spelled_in_lower_case():
    # typer 0.27.2 named `emu run`'s port option `--PORT` after its metavar, so `--port` was unknown there;
    # the lowest-versions test (tests/test_lowest_versions.py) runs this file on the oldest typer allowed.
    upper = []
    for name in COMMANDS:
        command = load_command(name)
        for path, cmd in [(name, command), *((f"{name} {s}", c) for s, c in getattr(command, "commands", {}).items())]:
            upper += [f"{path} {opt}" for p in cmd.params for opt in [*p.opts, *getattr(p, "secondary_opts", [])]
                      if opt.startswith("--") and opt != opt.lower()]
    assert not upper


def test_top_level_help_offers_no_completion():
    result = RUNNER.invoke(app, ["--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0 and "--install-completion" not in result.output
    assert "--show-completion" not in result.output


@pytest.mark.parametrize("path", _paths(), ids=" ".join)
def test_every_help_has_no_completion_and_no_bool_type(path):
    result = RUNNER.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "completion" not in result.output and "<bool>" not in result.output
    assert "--help" in result.output


def test_train_help_shows_flags_bare_and_typed_options_typed():
    text = RUNNER.invoke(app, ["train", "--help"], env={"COLUMNS": "200"}).output
    line = next(ln for ln in text.splitlines() if "--baseline" in ln)
    assert "--no-baseline" in line and "<" not in line
    assert "<int>" in next(ln for ln in text.splitlines() if "--np " in ln)


def test_collectives_list_says_what_the_ring_does_per_collective():
    text = RUNNER.invoke(app, ["collectives", "list", "--format", "csv"]).output
    ring = [line for line in text.splitlines() if line.startswith("ring,")]
    assert len(ring) == 5  # allreduce, reduce, broadcast, reduce_scatter, allgather
    assert ring[0] == "ring,-,Ring reduce-scatter + allgather (Patarasuk & Yuan 2009)"
    assert "Reduce to the root: ring reduce-scatter, then every member sends its block to the root" in ring[1]
    assert "Broadcast from the root: scatter the blocks, then ring allgather" in ring[2]
    assert "reduce-scatter" not in ring[2] and "Ring reduce-scatter:" in ring[3] and "Ring allgather:" in ring[4]


def test_cluster_help_lists_every_preset_from_one_place():
    from fabriclab.fabric.preset_names import PRESET_NAMES
    from fabriclab.fabric.presets import PRESETS

    assert PRESET_NAMES == tuple(PRESETS)
    for path in (["simulate", "collective"], ["whatif", "llm"], ["chakra", "run"], ["calibrate", "step"], ["plan"]):
        result = RUNNER.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        flat = " ".join(result.output.split()).replace("- ", "-")  # click may break a name at its hyphen
        assert all(name in flat for name in PRESET_NAMES), (path, flat)


def test_top_level_help_names_the_llm_commands_and_whatif_llm_its_defaults():
    top = RUNNER.invoke(app, ["--help"], env={"COLUMNS": "80"}).output
    for words in ("whatif llm", "plan --model llama3-70b", "calibrate step", "CNN and LLM"):
        assert words in top, words
    assert max(len(line) for line in top.splitlines()) <= 80
    llm = " ".join(RUNNER.invoke(app, ["whatif", "llm", "--help"], env={"COLUMNS": "100"}).output.split())
    assert "Default cluster: dgx-h100" in llm and "kernel model" in llm and "--efficiency" in llm


def test_bench_help_lists_each_command_on_one_whole_line():
    lines = RUNNER.invoke(app, ["bench", "--help"], env={"COLUMNS": "80"}).output.splitlines()
    commands = lines[lines.index("Commands:") + 1:]
    assert len(commands) >= 12 and all(line.startswith("  ") and not line.endswith("...") for line in commands)
    assert all(len(line.split(None, 1)) == 2 for line in commands)  # a name and its whole line, no wrap
