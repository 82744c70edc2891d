"""The layer picture (docs/layers.md, linked from the README) is the tree: every package once, in the import-rule
order (top first)."""

import re
from pathlib import Path

import fabriclab
from test_import_rules import LAYERS

LAYERS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "layers.md"
PACKAGE = Path(fabriclab.__file__).resolve().parent


def _pictured() -> list[str]:
    text = LAYERS_PAGE.read_text()
    block = text[text.index("# Layers"):]
    block = block[block.index("```") + 3:]
    block = block[:block.index("```")]
    return [m.group(1) for m in re.finditer(r"^(\w+)/\s", block, flags=re.M)]


def test_the_picture_names_every_package_in_layer_order():
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    pictured = _pictured()
    assert sorted(pictured) == packages, f"docs/layers.md pictures {sorted(pictured)}, the tree has {packages}"
    assert pictured == list(reversed(LAYERS)), \
        f"docs/layers.md order {pictured}, layer order (top first) {LAYERS[::-1]}"


def test_the_picture_check_reads_the_block():
    assert _pictured()[0] == "cli" and _pictured()[-1] == "workload"


def test_ci_runs_the_readme_test_command():
    """`.ci/run` runs the README's second set-up command as it stands there (the two commands open the README)."""
    root = Path(__file__).resolve().parents[1]
    block = (root / "README.md").read_text().split("```", 2)[1].strip().splitlines()
    assert len(block) == 2 and block[0].endswith("fabriclab run") and block[1].endswith("python -m pytest -q")
    ci = [line for line in (root / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == block[1]


def test_ci_runs_it_in_a_fresh_venv_it_removes():
    """Users run the README's command in a venv; so does `.ci/run`: made, activated, then removed on exit."""
    ci = [line for line in (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text().splitlines()
          if line and not line.startswith("#")]
    made = next(i for i, line in enumerate(ci) if "-m venv" in line)
    active = next(i for i, line in enumerate(ci) if "bin/activate" in line)
    removed = [line for line in ci if line.startswith("trap") and "rm -rf" in line and "EXIT" in line]
    assert made < active < len(ci) - 1 and removed


def test_ci_runs_the_slow_tests():
    """A plain `python -m pytest -q` skips the tests marked `slow` (tests/conftest.py); `.ci/run` exports
    FABRICLAB_SLOW=1 before the README's command, so CI runs them."""
    ci = [line for line in (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text().splitlines()
          if line and not line.startswith("#")]
    exported = [i for i, line in enumerate(ci) if line == "export FABRICLAB_SLOW=1"]
    assert exported and exported[0] < len(ci) - 1, ".ci/run must `export FABRICLAB_SLOW=1` before the test command"
    assert not any("FABRICLAB_SLOW=" in line for line in ci if line != "export FABRICLAB_SLOW=1")  # none unsets it
