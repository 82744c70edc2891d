"""Commands in a pipe (stdout and stderr to a real pipe, as `fabriclab ... | cat`): no line over 200
characters, whatever the command prints (tables fold long text and split wide tables into column groups,
notes wrap at words, the nccl-tests format summarises its devices). Run as a script it prints the longest
line of each command: `python tests/cli/test_pipe_lines.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

MAX_LINE = 200
LOGS = Path(__file__).resolve().parents[2] / "examples" / "nccl-tests-a100"
# (name, argv): the LLM front door, each output format, the widest tables and notes fabriclab prints.
MATRIX = (
    ("plan-llm", ["plan", "--model", "llama3-70b", "--gpus", "1024", "--clusters", "dgx-h100", "--nic-rates",
                  "400Gbps,800Gbps"]),
    ("results-show-plan-llm", ["results", "show", "1"]),
    ("whatif-llm", ["whatif", "llm", "--model", "llama3-70b", "--gpus", "1024", "--tp", "8", "--pp", "4"]),
    ("whatif-llm-markdown", ["whatif", "llm", "--model", "mixtral-8x7b", "--gpus", "64", "--tp", "2", "--etp", "2", "--ep", "4",
                             "--format", "markdown"]),
    ("simulate-cluster", ["simulate", "collective", "--cluster", "dgx-h100", "--gpus", "1024", "--sizes", "1MB,1GB"]),
    ("simulate-nccl-tests", ["simulate", "collective", "--cluster", "dgx-h100", "--gpus", "1024", "--sizes",
                             "1MB,1GB", "--format", "nccl-tests"]),
    ("simulate-ring", ["simulate", "collective", "--algo", "ring", "--hosts", "8"]),
    ("validate-published", ["validate", "published", "--rows", "awan-,zhang-"]),
    ("calibrate", ["calibrate", "nccl-tests", str(LOGS / "nccl_2.log"), str(LOGS / "nccl_4.log"), "--out", "a.json"]),
    ("plan-cnn", ["plan", "--model", "resnet50", "--gpus", "64,256"]),
    ("whatif-cnn", ["whatif"]),
    ("models", ["models"]),
    ("collectives-list", ["collectives", "list"]),
    ("results-list", ["results", "list"]),
    ("help", ["--help"]),
)


def run_in_pipe(argv: list[str], cwd: Path, store: Path) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | {"FABRICLAB_STORE": str(store)}
    done = subprocess.run([sys.executable, "-m", "fabriclab", *argv], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)
    return done.returncode, done.stdout


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Every command's pipe output, in order (the first writes record 1, the plan `results show 1` reads)."""
    tmp = tmp_path_factory.mktemp("pipe")
    return {name: run_in_pipe(argv, tmp, tmp / "store.db") for name, argv in MATRIX}


@pytest.mark.parametrize("name", [name for name, _ in MATRIX])
def test_no_pipe_line_is_over_200_characters(outputs, name):
    code, text = outputs[name]
    assert code == 0, text[-2000:]
    lines = text.splitlines()
    assert lines, name
    longest = max(lines, key=len)
    assert len(longest) <= MAX_LINE, (name, len(longest), longest[:240])


def test_the_matrix_reads_what_it_should(outputs):
    show = outputs["results-show-plan-llm"][1]
    assert "record 1: plan.llm" in show and "fabriclab plan --model llama3-70b --gpus 1024" in show
    assert "(columns 1-" in show  # the option rows' 60-odd columns in groups, not 1,500-character lines
    nccl = outputs["simulate-nccl-tests"][1]
    assert nccl.count("#  Rank ") == 8 and "1,024 ranks on 128 servers" in nccl


def main() -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        worst = 0
        for name, argv in MATRIX:
            code, text = run_in_pipe(argv, Path(tmp), Path(tmp) / "store.db")
            lines = text.splitlines() or [""]
            longest = max(map(len, lines))
            worst = max(worst, longest)
            print(f"{name:24s} exit {code}  {len(lines):5d} lines  longest {longest:5d}")
        print(f"longest line of the matrix: {worst}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
