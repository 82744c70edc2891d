"""SIGTERM handled like Ctrl-C: `kill PID`, a batch system's stop or a container's shutdown raises the same
KeyboardInterrupt in the command that Ctrl-C raises, so every command stops the way it stops on Ctrl-C: the
finished work stays stored (a plan's points, the records), its child processes are ended (pool workers,
ranks), and the CLI prints one `error:` line and exits 130.

Without this, SIGTERM's default action ended the command at once and its children lived on (a plan's pool
workers, forkserver and resource tracker), or found their parent gone and printed tracebacks (the ranks
of `train`).

Try it: `fabriclab plan --model resnet50 --gpus 512,1024,2048 --processes 2 & sleep 5; kill $!`.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator


class Terminated(KeyboardInterrupt):
    """The KeyboardInterrupt that SIGTERM raises (a KeyboardInterrupt, so every Ctrl-C path handles it)."""


def _raise_terminated(signum: int, frame: object) -> None:
    # Once only: a second SIGTERM must not break the cleanup that the first one started (ending the
    # children, storing the finished points); SIGKILL still ends everything.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises `Terminated` in the main thread; the previous handler after it.

    Elsewhere than the main thread (a command run from a test's thread) signals cannot be handled, and the
    block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
