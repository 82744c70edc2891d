"""Every test run writes its records to a store of its own, never to the user's results store.

Also the one probe of the emulator's root tests, shared by tests/emu (the emulator) and tests/cli (the `emu`
commands): `emu_root` skips unless this process is root with iproute2 and working network namespaces, veth
pairs and tbf (probed once with a throw-away namespace).

Tests marked `slow` run only where FABRICLAB_SLOW=1 (`.ci/run` exports it, so CI runs them); elsewhere they skip
with a reason: the marker's argument, which names the faster test that checks the same mechanism here.

The suite runs on two pytest-xdist workers (pyproject.toml's addopts: `-n 2 --dist loadgroup`; `-n 0` runs it in
this process). `FileOrGroup` hands out whole files, so a module's fixtures are computed once and its tests run in
file order, but the tests of the long files in `SPREAD` (no costly fixture shared) one by one; and whole groups
(`xdist_group`): every test that needs root is in group `root`, since they share the machine's emulated cluster
and its lock, and the few whose checks time a sleep to a tight bound are in `timing`. A worker ignores SIGINT and
its child processes inherit that: a test that sends a child Ctrl-C starts it with SIGINT at its default
(`sigint_as_default` in tests/runtime/test_launch.py).
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
SLOW_ENV = "FABRICLAB_SLOW"


def slow_skip_reason(covered_by: str) -> str:
    """Why a `slow` test skips here; `covered_by`: what checks its mechanism in the quick run."""
    return f"slow: runs where {SLOW_ENV}=1 (.ci/run sets it); here {covered_by}"


@pytest.hookimpl(tryfirst=True)  # before xdist's hook, which reads the `xdist_group` marks
def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        slow = item.get_closest_marker("slow")
        if slow is not None and os.environ.get(SLOW_ENV) != "1":
            covered_by = slow.args[0] if slow.args else "a faster test covers it"
            item.add_marker(pytest.mark.skip(reason=slow_skip_reason(covered_by)))
        if (config.pluginmanager.hasplugin("xdist") and item.get_closest_marker("xdist_group") is None
                and (item.get_closest_marker("root") or "emu_root" in getattr(item, "fixturenames", ()))):
            item.add_marker(pytest.mark.xdist_group("root"))


# Long files whose tests share no costly fixture (the golden set's cluster file takes seconds on each worker):
# their tests go to the workers one by one, so that neither waits for the other at the end.
SPREAD = frozenset({"tests/golden/test_golden.py", "tests/collectives/test_verify_all.py",
                    "tests/test_docs_figures.py", "tests/runtime/test_executor.py"})


def xdist_scope(nodeid: str) -> str:
    """A test's unit of work on the workers: its `xdist_group` (which `--dist loadgroup` writes after an `@`
    at the end of its id), else its file, or itself in a file of `SPREAD`."""
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.rsplit("@", 1)[1]
    path = nodeid.split("::", 1)[0]
    return nodeid if path in SPREAD else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileOrGroup(LoadScopeScheduling):
        """xdist's loadgroup, but a test outside every group goes with its file, not alone (module doc)."""

        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return FileOrGroup(config, log)


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
