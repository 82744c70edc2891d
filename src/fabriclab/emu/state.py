"""The state file of the emulated cluster: what `emu up` built, so that `emu run`, `status` and `down` find it.

It lives at `/run/fabriclab/emu.json` (tmpfs on most systems: gone after a reboot, like the namespaces),
or `/tmp/fabriclab-emu.json` where /run is not writable; `FABRICLAB_EMU_STATE` overrides the path. A
state file names its cluster: the cluster's namespaces carry the file's tag (`name_tag`: none for the
default file, `flh0`; five hex digits of the path for another), so `emu down` removes the namespaces with
its tag, with or without the file itself (a build killed before it wrote the file), and never another
state file's cluster. A lock (`/run/fabriclab/emu.lock`, flock, released by the kernel when its holder dies,
even by kill -9) keeps two processes from building or tearing down at once; `emulated_cluster` holds it
while its cluster is up.

Try it: `sudo fabriclab emu up --topology star --hosts 3 --link 200Mbps && cat /run/fabriclab/emu.json`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

from fabriclab.emu.netns import EmuError
from fabriclab.fabric.scenario import TopologySpec

STATE_ENV = "FABRICLAB_EMU_STATE"
# A state of 512 namespaces (the emulator's most) takes about 1 MB; anything far larger is not ours.
MAX_STATE_BYTES = 64 << 20
STATE_VERSION = 2  # 2: the topology spec holds numbers (bandwidth_Bps, latency_s), not unit strings


@dataclass(frozen=True, kw_only=True)
class EmuHost:
    """One emulated host: a network namespace running one rank."""

    rank: int
    """Rank (and endpoint index in the topology) of the process `emu run` starts here."""
    namespace: str
    """Network namespace name, e.g. `flh0`."""
    ip: str
    """The host's IPv4 address (a /32 on its first interface), e.g. `10.77.0.1`."""
    iface: str
    """Interface carrying the address: what GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME name."""


@dataclass(frozen=True, kw_only=True)
class EmuLink:
    """One emulated cable: a veth pair, each end shaped with tbf at its directed link's rate / dilation."""

    a: str
    """Namespace of one end."""
    a_iface: str
    """Interface name of that end (named after the namespace at the other end)."""
    b: str
    """Namespace of the other end."""
    b_iface: str
    """Interface name of the other end."""
    names: tuple[str, str]
    """Topology names of the two directed links, a->b then b->a, e.g. ('h0->leaf0', 'leaf0->h0')."""
    rate_Bps: tuple[float, float]
    """Emulated (dilated) rates a->b and b->a in bytes per second: topology bandwidth / dilation."""
    burst_bytes: tuple[int, int]
    """tbf bucket (burst) of each direction, bytes."""
    limit_bytes: tuple[int, int]
    """tbf queue limit of each direction, bytes."""


@dataclass(frozen=True, kw_only=True)
class ClusterState:
    """What `emu up` built."""

    spec: dict
    """The TopologySpec as a dict (`TopologySpec.as_dict()`); `topology_spec()` rebuilds it."""
    dilation: float
    """Time dilation D: every link runs at bandwidth / D."""
    hosts: tuple[EmuHost, ...]
    """Hosts in rank order."""
    switches: tuple[str, ...]
    """Namespaces of the switches (they forward IP; static /32 routes)."""
    links: tuple[EmuLink, ...]
    """Every cable."""
    routing: str = "destination"
    """`destination` (one /32 route per destination) or `source` (policy rules per source where needed)."""
    rtts: tuple[tuple[int, int, float], ...] = ()
    """Base round trips measured at `up`: (rank, links on the route from rank 0, min RTT s) per host."""
    hop_latency_s: float | None = None
    """Estimated one-way latency per link of the bare emulation (dilated time); None if not measured."""
    created_at: float = field(default_factory=time.time)
    """Unix time of `up`."""
    driver_pid: int = field(default_factory=os.getpid)
    """Process that built the cluster."""
    version: int = STATE_VERSION
    """State file format version."""

    def __post_init__(self) -> None:
        # Keep the spec in its JSON form (lists, not tuples) so a state equals its reloaded copy.
        object.__setattr__(self, "spec", json.loads(json.dumps(self.spec)))

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Every namespace: hosts first, then switches."""
        return tuple(h.namespace for h in self.hosts) + self.switches

    def topology_spec(self) -> TopologySpec:
        """The TopologySpec the cluster was built from."""
        return TopologySpec.from_dict(self.spec)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_dict(cls, data: dict) -> ClusterState:
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"state file version {data.get('version')!r}, expected {STATE_VERSION}")
        data = dict(data)
        data["hosts"] = tuple(EmuHost(**h) for h in data["hosts"])
        data["switches"] = tuple(data["switches"])
        data["links"] = tuple(EmuLink(**{k: tuple(v) if isinstance(v, list) else v for k, v in link.items()})
                              for link in data["links"])
        data["rtts"] = tuple(tuple(r) for r in data.get("rtts", ()))
        return cls(**data)


def _run_dir() -> Path | None:
    run_dir = Path("/run")
    return run_dir / "fabriclab" if run_dir.is_dir() and os.access(run_dir, os.W_OK) else None


def default_state_path() -> Path:
    """/run/fabriclab/emu.json, else /tmp/fabriclab-emu.json where /run is not writable."""
    run_dir = _run_dir()
    return run_dir / "emu.json" if run_dir else Path("/tmp/fabriclab-emu.json")


def state_path() -> Path:
    """Where the state file lives: $FABRICLAB_EMU_STATE, else the default (`default_state_path`)."""
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    return default_state_path()


def private_state_path(pid: int | None = None) -> Path:
    """The state file of process `pid`'s own (default: this one's), beside the usual one: a program's cluster
    (`emulated_cluster`) then never shares names with the cluster of `emu up`, nor with another program's."""
    path = state_path()
    return path.with_name(f"{path.stem}-{os.getpid() if pid is None else pid}{path.suffix}")


def name_tag(path: Path | None = None) -> str:
    """The tag in the names of the cluster of state file `path` (default: `state_path()`): empty for the
    default file, so its hosts stay `flh0`, `flh1`, ...; else five hex digits of the absolute path."""
    path = Path(os.path.abspath(path or state_path()))
    if path == Path(os.path.abspath(default_state_path())):
        return ""
    # 20 bits: two state files in use at once on one machine share a tag with odds of about 1 in a million.
    return hashlib.blake2b(str(path).encode(), digest_size=3).hexdigest()[:5]


def lock_path() -> Path:
    """The lock guards the machine's namespaces, so it does not follow $FABRICLAB_EMU_STATE."""
    run_dir = _run_dir()
    return run_dir / "emu.lock" if run_dir else Path("/tmp/fabriclab-emu.lock")


def save_state(state: ClusterState, path: Path | None = None) -> Path:
    """Write the state atomically (temporary file, then rename); returns the path."""
    path = path or state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(state.to_json())
    tmp.replace(path)
    return path


def load_state(path: Path | None = None) -> ClusterState | None:
    """The recorded state, or None when there is no state file or it cannot be read (stale or corrupt)."""
    path = path or state_path()
    try:
        if path.stat().st_size > MAX_STATE_BYTES:  # not a state this module wrote: treat as corrupt
            return None
        return ClusterState.from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, KeyError, AttributeError, OSError):
        return None


def clear_state(path: Path | None = None) -> None:
    """Remove the state file if there is one."""
    (path or state_path()).unlink(missing_ok=True)


@contextmanager
def cluster_lock(timeout_s: float = 120.0, *, path: Path | None = None) -> Iterator[None]:
    """Hold the emulator's lock (one builder or user of the cluster at a time) for the body.

    Not re-entrant: a process that holds it must not ask again (flock locks belong to one open file)."""
    lock = path or lock_path()
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                    raise EmuError(f"another fabriclab emu process (pid {holder}) holds {lock} for more "
                                   f"than {timeout_s:g} s: wait for it to finish or stop it") from None
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)
