"""The simulator side of the CLI starts without torch: importing the CLI and running these commands
loads no `torch` module (checked in a fresh interpreter, where nothing else could have loaded it)."""

import json
import subprocess
import sys

import pytest

# Each command runs in-process through the click app, then the child reports the torch modules loaded.
PROBE = """
import json, sys
from typer.testing import CliRunner
from fabriclab.cli.main import app
argv = json.loads(sys.argv[1])
result = CliRunner().invoke(app, argv) if argv is not None else None
loaded = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
print(json.dumps({"exit_code": None if result is None else result.exit_code, "torch": loaded[:5],
                  "output": "" if result is None else result.output[-300:]}))
"""

COMMANDS = [
    None,  # importing the CLI only
    ["--help"],
    ["simulate", "collective"],
    ["simulate", "collective", "--topology", "star", "--hosts", "4", "--size", "1MB", "--format", "json"],
    ["whatif", "--workers", "16", "--bandwidth", "25Gbps"],
    ["whatif", "--cost", "simulated", "--workers", "4", "--bandwidth", "10Gbps"],
    ["models"],
    ["models", "resnet50", "--format", "csv"],
    ["collectives", "list"],
    ["collectives", "show", "--algo", "ring", "--ranks", "4"],
    ["collectives", "verify", "--algo", "ring", "--ranks", "1-5"],
    ["validate", "--help"],
    ["emu", "--help"],
    ["bench", "--help"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: "import" if a is None else " ".join(a))
def test_command_loads_no_torch(argv, tmp_path):
    env_store = str(tmp_path / "results.db")
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True, text=True,
                          timeout=120, env={**__import__("os").environ, "FABRICLAB_STORE": env_store})
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["exit_code"] in (None, 0), report["output"]
    assert report["torch"] == [], f"{argv} imported {report['torch']}"
