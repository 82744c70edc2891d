"""The names of the cluster presets, without building them: help texts list them from here, so that
`--help` does not import the cluster model. The names are read from `PRESETS` in `fabric/presets.py` (its
source, parsed, not imported): a preset added there is in every `--cluster` help at once.

Try it: `fabriclab simulate collective --help` (the `--cluster` line lists these).
"""

from __future__ import annotations

import ast
from pathlib import Path


def _names() -> tuple[str, ...]:
    tree = ast.parse(Path(__file__).with_name("presets.py").read_text(encoding="utf-8"))
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "PRESETS" and isinstance(node.value, ast.Dict):
            return tuple(k.value for k in node.value.keys if isinstance(k, ast.Constant))
    raise AssertionError("fabric/presets.py defines no PRESETS dict literal")


PRESET_NAMES = _names()
