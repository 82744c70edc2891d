"""Thin wrappers around iproute2 (`ip`, `tc`) and setns(2): the only module of emu/ that touches the system.

Everything the emulator creates is named so that one pattern finds it again: network namespaces
`fl<tag>h<i>` (hosts) and `fl<tag>s<j>` (switches), where the tag names the cluster's state file
(`state.name_tag`: empty for the default one, so `flh0`, `fls0`; five hex digits for any other). Cleanup of
a cluster never depends on its state file being there: it lists namespaces and root links and removes those
whose names carry its tag (`cluster_names`), and so never those of another cluster (`OUR_NAME` finds all).

* `run`, `ip`, `batch` call the tools and raise `EmuError` with the command and the tool's own message.
* `check_system` raises `EmuUnavailable` (a ValueError: the CLI prints one line, exit 2) without root or
  without iproute2.
* `in_netns(name)` moves the calling *thread* into a namespace (setns(2) via ctypes; Python 3.11 has no
  os.setns) and back: sockets created inside stay in that namespace, so one process can open sockets in
  several namespaces (the ping below, the tests' TCP transfers).
* `ping` is an ICMP echo in Python (raw socket, root), because iputils `ping` is often not installed.

Try it: `sudo python -c "from fabriclab.emu import netns; netns.check_system(); print(netns.our_namespaces())"`.
"""

from __future__ import annotations

import ctypes
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

# Every emulator name, of any cluster: namespaces, and any root-namespace link with such a name (veth ends
# are named after the namespace at their other end, so a stray end left in the root namespace matches too).
OUR_NAME = re.compile(r"^fl(?:[0-9a-f]{5})?[hs][0-9]+(-[0-9]+)?$")
TAG = re.compile(r"^(?:[0-9a-f]{5})?$")
# Linux limits interface names to IFNAMSIZ - 1 = 15 characters.
IFNAME_MAX = 15
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


class EmuError(RuntimeError):
    """A system command of the emulator failed (the message names the command and the tool's error)."""


class EmuUnavailable(ValueError):
    """This machine cannot emulate a cluster (not root, no iproute2, no network namespaces)."""


def check_system() -> None:
    """Raise EmuUnavailable with one line saying what is missing; return when emulation can work."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        raise EmuUnavailable("fabriclab emu needs root (network namespaces, veth pairs, tc): "
                             "run it as root, e.g. `sudo fabriclab emu ...`")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise EmuUnavailable(f"`{tool}` not found on PATH: install iproute2 "
                                 f"(e.g. `apt-get install iproute2`) to emulate a cluster")


def run(argv: Sequence[str], *, stdin: str | None = None, timeout_s: float = 60.0,
        check: bool = True) -> str:
    """Run a command, return its stdout; on failure raise EmuError quoting the command and its stderr."""
    try:
        done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        raise EmuUnavailable(f"`{argv[0]}` not found: install iproute2 to emulate a cluster") from None
    except subprocess.TimeoutExpired:
        raise EmuError(f"`{' '.join(argv)}` did not finish within {timeout_s:g} s") from None
    if check and done.returncode != 0:
        message = " ".join(done.stderr.split()) or f"exit code {done.returncode}"
        raise EmuError(f"`{' '.join(argv[:6])}{' ...' if len(argv) > 6 else ''}` failed: {message}")
    return done.stdout


def ip(*args: str, ns: str | None = None, check: bool = True) -> str:
    """`ip [-n ns] args...`; stdout."""
    return run(["ip", *(["-n", ns] if ns else []), *args], check=check)


def batch(tool: str, lines: Sequence[str], ns: str | None = None) -> None:
    """Run many `ip` or `tc` commands in one process (`tool [-n ns] -batch -`); stops at the first error."""
    if lines:
        run([tool, *(["-n", ns] if ns else []), "-batch", "-"], stdin="\n".join(lines) + "\n",
            timeout_s=60.0 + 0.05 * len(lines))


def host_namespace(tag: str, rank: int) -> str:
    """The namespace of host `rank` of the cluster tagged `tag`: `flh0` (no tag), `fl1a2b3h0`."""
    return f"fl{tag}h{rank}"


def switch_namespace(tag: str, index: int) -> str:
    """The namespace of switch `index` of the cluster tagged `tag`: `fls0` (no tag), `fl1a2b3s0`."""
    return f"fl{tag}s{index}"


def cluster_names(tag: str | None) -> re.Pattern:
    """The names of the cluster tagged `tag` (`""`: the default state file's), or of every cluster (None)."""
    if tag is None:
        return OUR_NAME
    assert TAG.match(tag), f"bad cluster tag {tag!r}"
    return re.compile(rf"^fl{tag}[hs][0-9]+(-[0-9]+)?$")


def list_netns() -> list[str]:
    """Names of all named network namespaces (`ip netns list`), ours or not."""
    return [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]


def our_namespaces(tag: str | None = None) -> list[str]:
    """Namespaces of the cluster tagged `tag`, or of every emulated cluster (None), sorted."""
    pattern = cluster_names(tag)
    return sorted((name for name in list_netns() if pattern.match(name)), key=_natural)


def our_root_links(tag: str | None = None) -> list[str]:
    """Links in the root namespace with the names of the cluster tagged `tag` (None: of any): strays of an
    interrupted build."""
    pattern, names = cluster_names(tag), []
    for line in ip("-o", "link", "show").splitlines():
        fields = line.split(":", 2)
        if len(fields) > 1:
            name = fields[1].strip().split("@")[0]
            if pattern.match(name):
                names.append(name)
    return names


def netns_pids(name: str) -> list[int]:
    """Processes living in a namespace (`ip netns pids`)."""
    return [int(pid) for pid in ip("netns", "pids", name, check=False).split() if pid.isdigit()]


def delete_netns(name: str) -> None:
    """Kill what runs inside a namespace, then delete it (its veth ends, and so their peers, go with it)."""
    for pid in netns_pids(name):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    ip("netns", "delete", name, check=False)
    if Path("/run/netns", name).exists():
        raise EmuError(f"could not delete network namespace {name}: remove it with `ip netns delete {name}`")


def delete_link(name: str) -> None:
    """Delete a root-namespace link (a veth end takes its peer with it)."""
    ip("link", "delete", name, check=False)


def _setns(fd: int, what: str) -> None:
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise EmuError(f"setns into {what} failed: {os.strerror(err)}")


@contextmanager
def in_netns(name: str) -> Iterator[None]:
    """Run the body with the calling thread inside network namespace `name`, then move it back."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        try:
            target = os.open(f"/run/netns/{name}", os.O_RDONLY)
        except FileNotFoundError:
            raise EmuError(f"network namespace {name} does not exist (is the emulated cluster up?)") from None
        try:
            _setns(target, name)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home, "the original namespace")
    finally:
        os.close(home)


def set_sysctls(name: str, values: dict[str, str]) -> None:
    """Write `net.*` sysctls inside a namespace (paths like `net/ipv4/ip_forward`); missing ones are skipped."""
    with in_netns(name):
        for key, value in values.items():
            path = Path("/proc/sys", key)
            if path.exists():
                path.write_text(value)


def die_with_parent() -> None:
    """preexec_fn for children: the kernel sends them SIGKILL when the thread that started them dies."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def ping(ns: str, address: str, *, count: int = 3, timeout_s: float = 1.0,
         payload_bytes: int = 56) -> list[float | None]:
    """ICMP echo from namespace `ns` to `address`: round-trip seconds per probe, None where none came back."""
    with in_netns(ns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident = (os.getpid() ^ threading.get_ident()) & 0xFFFF
    rtts: list[float | None] = []
    with sock:
        for seq in range(count):
            body = bytes(payload_bytes)
            header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
            packet = struct.pack("!BBHHH", 8, 0, _checksum(header + body), ident, seq) + body
            start = time.perf_counter()
            sock.sendto(packet, (address, 0))
            rtts.append(_await_echo(sock, ident, seq, start, timeout_s))
    return rtts


def _await_echo(sock: socket.socket, ident: int, seq: int, start: float, timeout_s: float) -> float | None:
    deadline = start + timeout_s
    while (left := deadline - time.perf_counter()) > 0:
        if not select.select([sock], [], [], left)[0]:
            return None
        data = sock.recv(65535)
        now = time.perf_counter()
        icmp = data[(data[0] & 0x0F) * 4:]
        if len(icmp) >= 8:
            kind, _, _, rid, rseq = struct.unpack("!BBHHH", icmp[:8])
            if kind == 0 and rid == ident and rseq == seq:
                return now - start
    return None


def _natural(name: str) -> tuple:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"([0-9]+)", name))
