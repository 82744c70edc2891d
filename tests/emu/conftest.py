"""Fixtures of the emulator tests: root tests skip with a reason where namespaces cannot be made.

`emu_root` (tests/conftest.py) skips unless this process is root with iproute2 and working network
namespaces, veth pairs and tbf. `emu_locked` also holds the emulator's lock for the test (so a concurrent
test session or CLI user waits instead of tearing our cluster down) and removes the default state file's
cluster afterwards. `tcp_goodput` measures bulk TCP transfers between emulated hosts.
Beware: root tests remove the cluster of the default state file (`fabriclab emu up` without
$FABRICLAB_EMU_STATE) if one is up on this machine; other state files' clusters are left alone.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest


@pytest.fixture
def emu_locked(emu_root):
    from fabriclab.emu.cluster import teardown_cluster
    from fabriclab.emu.state import cluster_lock

    with cluster_lock():
        try:
            yield
        finally:
            teardown_cluster()


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
