"""Options given but without effect in this run: one `warning:` line each, on stderr, once.

Many options matter only beside another option or value: `--fsdp-unit` only with `--zero 3`, `--trace-stage`
only with `--trace`, `--qps` only where ECMP hashes QPs, `--seeds` only where something is drawn, a topology's
`--link` not with `--cluster`. Given otherwise, they were accepted and dropped without a word, and the user
believed they counted. A command lists its rules, each `(given and ignored, option, why)`, and
`warn_ignored` prints `warning: --fsdp-unit is ignored with --zero 1: ...` for each that holds; an option
named by several rules is warned about once. The rules of the option groups several commands share live
beside the groups (`llm_options.llm_ignored`, `routing_options.routing_ignored`).

Try it: `fabriclab whatif llm --fsdp-unit 4` (one warning line on stderr, then the answer).
"""

from __future__ import annotations

from typing import Iterable

from fabriclab.cli.common import err_console

Rule = tuple[bool, str, str]
"""(the option was given and this run ignores it, the option as typed, why: `with --zero 1: ...`)."""


def warn_ignored(rules: Iterable[Rule]) -> list[str]:
    """Print `warning: OPTION is ignored WHY` on stderr for each rule that holds, once per option (its first
    rule that holds); returns the lines printed."""
    lines: dict[str, str] = {}
    for holds, option, why in rules:
        if holds and option not in lines:
            lines[option] = f"warning: {option} is ignored {why}"
    for line in lines.values():
        err_console.print(line, style="yellow", markup=False, soft_wrap=True)
    return list(lines.values())


def given(value, default) -> bool:
    """Whether an option's value differs from its default (typer cannot tell a default typed out; that one
    changes nothing, so it needs no warning)."""
    return value is not None and value != default
