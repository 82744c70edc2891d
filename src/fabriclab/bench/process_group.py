"""Run a peer simulator's binary as a process group of its own, and end the whole group however the run ends.

ASTRA-sim and SimAI run under wrappers (`stdbuf`, `setarch`, SimAI's shell scripts) that start the binary
as their child, and a binary may start children of its own. Killing the one process we started, as
`subprocess.run` does at its time limit, left the rest running for as long as the simulation takes; an
interrupt (Ctrl-C, or SIGTERM, which the CLI turns into KeyboardInterrupt: `cli/signals.py`) or a crash of
fabriclab left all of them. `own_group` starts the process in a new session, its own process group, and
when the block ends, by a return, the time limit, an interrupt or an exception, kills the whole group with
SIGKILL and reaps the process. The output goes to files, not pipes: a child that holds a pipe open would
keep a reader waiting after the binary itself has ended.

Try it: `fabriclab bench astra-sim --timeout 5s` (nothing of ASTRA-sim's is left running after it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Iterator


@contextlib.contextmanager
def own_group(argv: list[str], **popen_kwargs) -> Iterator[subprocess.Popen]:
    """`subprocess.Popen(argv, **popen_kwargs)` in a new session; when the block ends, however it ends, the
    process group is killed and the process reaped (`kill_group`). An OSError when it does not start."""
    proc = subprocess.Popen(argv, start_new_session=True, **popen_kwargs)
    try:
        yield proc
    finally:
        kill_group(proc)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL to `proc`'s process group (its pid: `own_group` made it the leader), then wait for `proc`. The
    group outlives its leader while a child lives, so this also ends what a finished binary left behind."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # the group is gone: every member ended
        pass
    except PermissionError:  # no member could be signalled (another user's): at least not wait forever
        proc.kill()
    proc.wait()


def wait_for(proc: subprocess.Popen, timeout_s: float) -> int | None:
    """The process's exit status, or None when it ran past `timeout_s` (`own_group` then ends it)."""
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
