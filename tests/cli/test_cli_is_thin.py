"""The CLI is thin (DESIGN.md): no function in `fabriclab/cli/` is longer than 60 lines, decorators included.

Run as a script it prints the longest functions: `python tests/cli/test_cli_is_thin.py`.
"""

import ast
import sys
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "src" / "fabriclab" / "cli"
MAX_LINES = 60


def function_lengths(root: Path) -> list[tuple[int, str]]:
    """(lines, `file:line name`) of every function under `root`, longest first."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
                found.append((node.end_lineno - first + 1, f"{path.relative_to(root.parent)}:{node.lineno} {node.name}"))
    return sorted(found, reverse=True)


def test_no_cli_function_is_longer_than_60_lines():
    long = [f"{n} lines: {where}" for n, where in function_lengths(CLI) if n > MAX_LINES]
    assert not long, "split these or move their logic below cli/:\n" + "\n".join(long)


def test_the_count_includes_decorators_and_catches_a_long_function(tmp_path):
    (tmp_path / "m.py").write_text("@app.command()\ndef f():\n" + "    x = 1\n" * 60)
    assert function_lengths(tmp_path)[0][0] == 62


if __name__ == "__main__":
    for n, where in function_lengths(CLI)[:int(sys.argv[1]) if len(sys.argv) > 1 else 10]:
        print(n, where)
