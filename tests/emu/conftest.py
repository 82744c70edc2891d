"""Fixtures of the emulator tests: root tests skip with a reason where namespaces cannot be made.

`emu_root` skips unless this process is root with iproute2 and working network namespaces, veth pairs and
tbf (probed once with a throw-away namespace). `emu_locked` also holds the emulator's lock for the test (so
a concurrent test session or CLI user waits instead of tearing our cluster down) and removes every
namespace of ours afterwards. `tcp_goodput` measures bulk TCP transfers between emulated hosts.
Beware: root tests remove any emulated cluster that is up on this machine.
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest
import typer

from fabriclab.cli import emu as emu_cli

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


@pytest.fixture
def emu_locked(emu_root):
    from fabriclab.emu.cluster import teardown_cluster
    from fabriclab.emu.state import cluster_lock

    with cluster_lock():
        try:
            yield
        finally:
            teardown_cluster()


@pytest.fixture
def emu_app() -> typer.Typer:
    """A typer app with only the `emu` group registered, as `cli/main.py` will register it."""
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """fabriclab (test app)."""

    emu_cli.register(app)
    return app


def tcp_goodput(state, pairs: list[tuple[int, int]], seconds: float, warmup_s: float = 0.3) -> list[float]:
    """TCP goodput in bit/s of simultaneous bulk transfers src -> dst (one per pair), over `seconds` after
    `warmup_s`. The sockets are created inside the namespaces but live in this process, and byte counts and
    the clock are read together in-process: sampling through a subprocess (`tc -s`) added several % of noise."""
    from fabriclab.emu import netns

    flows, received, threads = [], [0] * len(pairs), []
    for i, (src, dst) in enumerate(pairs):
        with netns.in_netns(state.hosts[dst].namespace):
            server = socket.create_server((state.hosts[dst].ip, 5201 + i))
        with netns.in_netns(state.hosts[src].namespace):
            client = socket.create_connection((state.hosts[dst].ip, 5201 + i))
        conn, _ = server.accept()
        flows.append((server, client, conn))
    end = time.monotonic() + warmup_s + seconds + 0.2

    def receive(i: int, conn: socket.socket) -> None:
        buf = bytearray(1 << 20)
        while k := conn.recv_into(buf):
            received[i] += k

    def send(client: socket.socket) -> None:
        data = bytes(1 << 20)
        while time.monotonic() < end:
            client.sendall(data)
        client.shutdown(socket.SHUT_WR)

    for i, (_, client, conn) in enumerate(flows):
        threads += [threading.Thread(target=receive, args=(i, conn)),
                    threading.Thread(target=send, args=(client,))]
    for t in threads:
        t.start()
    time.sleep(warmup_s)
    t0, b0 = time.perf_counter(), list(received)
    time.sleep(seconds)
    t1, b1 = time.perf_counter(), list(received)
    for t in threads:
        t.join()
    for flow in flows:
        for sock in flow:
            sock.close()
    return [(after - before) * 8 / (t1 - t0) for before, after in zip(b0, b1)]


@pytest.fixture(name="tcp_goodput")
def tcp_goodput_fixture():
    return tcp_goodput
