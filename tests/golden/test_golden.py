"""Golden set: the answers of this tree's CLI equal those recorded from commit ed96716.

For every command of `commands.py` this runs `python -m fabriclab ...` (this interpreter, so the fabriclab it
imports, in a fresh process with `FABRICLAB_STORE=off`, in an empty folder), normalises what the command wrote
(`harness.normalise`: no timestamps, timings of our own code, host facts, versions, git revision or output
paths) and compares it with `data/<name>.json`: every number within 1e-12 relative (1e-15 absolute where one
side is 0), every string, boolean and null equal, the same keys and list lengths. A failure names the JSON
paths with the stored and the new value (the first 10).

The stored records are the reference: do not re-record them to make this test pass (see `record.py`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

# ---------------------------------------------------------------------------------------------------------
# RENAMES: the one place to say that a key or a string of the stored records has a new name.
#
# RENAMED_KEYS: old key -> new key, applied to the stored records (at any depth: config, results, files)
# before comparing, e.g. {"gpus_per_host": "gpus_per_server"} when `--gpus-per-host` becomes
# `--gpus-per-server` and the record's config key follows. Only a name changes: the value must still match.
# RENAMED_STRINGS: old substring -> new substring in the stored strings, for a text that names a moved file,
# e.g. {"fabric/data/prices.json": "plan/data/prices.json"} (plan's `config.prices` names the price table).
#
# One stored value was corrected by hand, not re-recorded: `whatif --cost simulated` at ed96716 wrote
# `config.topology.latency_s` = 2e-07 (the topology options' default) while it simulated with `--latency`
# (`config.latency_s`); the three whatif-simulated-* records now hold the latency actually simulated.
# Every result of those commands is the recorded one.
#
# The commands keep their old option spellings on purpose (the old spellings remain as hidden aliases).
RENAMED_KEYS: dict[str, str] = {"gpus_per_host": "gpus_per_server", "gpus_per_node": "gpus_per_server",
                                 "ranks_per_node": "gpus_per_server"}
RENAMED_STRINGS: dict[str, str] = {"fabric/data/prices.json": "plan/data/prices.json",
                                   "gpus_per_host=": "gpus_per_server=", "ranks per node": "GPUs per server"}
# ---------------------------------------------------------------------------------------------------------

MAX_SHOWN = 10

# The longest commands, each beside a faster one that checks the same path here (marked `slow`: CI compares their
# answers too, tests/conftest.py): name -> what covers it. Not `validate-published`: only it holds the Horovod
# and NeMo rows.
SLOW = {
    "bench-plan": "tests/bench/test_speed_plan.py runs `bench plan` on a tiny grid, and the plan-* commands plan",
    "bench-sim-ring-256-ps-2048": "bench-sim-ring-2048 runs `bench sim`",
    "collectives-verify-all": "collectives-verify-some runs `collectives verify`, tests/collectives every algorithm",
}


sys.path.insert(0, str(HERE))  # harness and commands sit beside this file
import commands  # noqa: E402
import harness  # noqa: E402
COMMANDS = commands.COMMANDS


@pytest.fixture(scope="session")
def cluster_file(tmp_path_factory) -> Path:
    """The cluster file of the `{cluster}` commands, fitted by this tree's `calibrate nccl-tests`."""
    return harness.make_cluster(tmp_path_factory.mktemp("golden-cluster"))


def test_names_are_unique_and_every_record_has_a_command():
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names)), "duplicate command names in commands.py"
    stored = {p.stem for p in harness.DATA.glob("*.json")}
    assert stored == set(names), (f"data/ without a command: {sorted(stored - set(names))}; "
                                  f"commands without data (run record.py on a good commit): "
                                  f"{sorted(set(names) - stored)}")


def test_every_slow_name_is_a_command_and_a_faster_one_stays():
    names = {c.name for c in COMMANDS}
    assert set(SLOW) <= names, f"SLOW names no command: {sorted(set(SLOW) - names)}"
    assert {"validate-published", "bench-sim-ring-2048", "collectives-verify-some"} <= names - set(SLOW)


@pytest.mark.parametrize("command", [pytest.param(c, marks=pytest.mark.slow(SLOW[c.name])) if c.name in SLOW else c
                                     for c in COMMANDS], ids=[c.name for c in COMMANDS])
def test_golden(command, tmp_path, request):
    import json

    path = harness.data_path(command.name)
    if not path.exists():
        pytest.fail(f"no golden record {path.name}: record it with tests/golden/record.py on a known-good commit")
    stored = json.loads(path.read_text())
    assert stored["argv"] == list(command.argv), (
        f"commands.py changed {command.name}'s argv since it was recorded: {stored['argv']} -> {command.argv}")

    cluster = request.getfixturevalue("cluster_file") if any("{cluster}" in a for a in command.argv) else None
    raw = harness.run_raw(command, tmp_path / "run", cluster)
    new = harness.normalise(command, raw, tmp_path / "run")

    expected = harness.rename({k: stored[k] for k in ("record", "files", "stdout") if k in stored},
                              RENAMED_KEYS, RENAMED_STRINGS)
    diffs = harness.compare(expected, new)
    if diffs:
        shown = "\n  ".join(diffs[:MAX_SHOWN])
        more = f"\n  ... and {len(diffs) - MAX_SHOWN} more" if len(diffs) > MAX_SHOWN else ""
        pytest.fail(f"{command.name}: {len(diffs)} difference(s) from the golden record {path.name} "
                    f"(`fabriclab {' '.join(command.argv)}`):\n  {shown}{more}", pytrace=False)


def test_compare_reads_numbers_carried_as_text_within_the_tolerance():
    # a CSV cell that differs in the last bits is the same number; one that differs in the 10th digit is not
    assert harness.compare({"t": "2.1309096320000003"}, {"t": "2.130909631999999"}) == []
    assert harness.compare({"t": "2.1309096320"}, {"t": "2.1309096330"}) != []
    assert harness.compare({"m": "ring"}, {"m": "tree"}) != []
    assert harness.compare({"t": "nan"}, {"t": "1.0"}) != []
    assert harness.compare({"t": "1.0"}, {"t": "1.0000000000001"}, exact=True) != []
