"""Every test run writes its records to a store of its own, never to the user's results store.

Also the one probe of the emulator's root tests, shared by tests/emu (the emulator) and tests/cli (the `emu`
commands): `emu_root` skips unless this process is root with iproute2 and working network namespaces, veth
pairs and tbf (probed once with a throw-away namespace).
"""

import functools
import os
import shutil
import subprocess
import tempfile

import pytest

os.environ.setdefault("FABRICLAB_STORE", os.path.join(tempfile.mkdtemp(prefix="fabriclab-test-store-"),
                                                      "results.db"))

PROBE_NS = f"flprobe{os.getpid()}"


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True)


@functools.cache
def netns_problem() -> str | None:
    """Why this machine cannot run the root tests, or None."""
    if os.geteuid() != 0:
        return "needs root for network namespaces (run the tests as root)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"`{tool}` (iproute2) is not installed"
    made = _run("ip", "netns", "add", PROBE_NS)
    if made.returncode != 0:
        return f"`ip netns add` fails here: {made.stderr.strip()}"
    try:
        for argv in (("ip", "-n", PROBE_NS, "link", "add", "pa", "type", "veth", "peer", "name", "pb"),
                     ("tc", "-n", PROBE_NS, "qdisc", "add", "dev", "pa", "root", "tbf", "rate", "100mbit",
                      "burst", "128k", "limit", "1m")):
            done = _run(*argv)
            if done.returncode != 0:
                return f"`{' '.join(argv[:5])} ...` fails here: {done.stderr.strip()}"
    finally:
        _run("ip", "netns", "delete", PROBE_NS)
    return None


@pytest.fixture(scope="session")
def emu_root() -> None:
    problem = netns_problem()
    if problem:
        pytest.skip(problem)
