"""Build and tear down an emulated cluster from a `Topology`: namespaces, veth cables, tbf shaping, routes.

Every node becomes a network namespace: endpoints are hosts `flh<rank>`, other nodes (leaf, spine, star
switch) switches `fls<j>` that forward IP; a cluster of another state file than the default has the file's
tag after `fl` (`fl1a2b3h0`, see `state.name_tag`): a cluster is known by its state file, and building or
tearing one down never touches another. Switches are routers, not Linux bridges: a fat tree with several
spines has L2 loops, and IP routes can follow `Topology.route()` exactly. A cable is one veth pair whose
ends are named after the namespace at the other end (`fls0` inside `flh3` leads to switch 0).

* **Addresses**: one /32 per node in 10.77.0.0/16 (hosts 10.77.0.1.., switches 10.77.128.1..) on its first
  interface; next hops are `via <neighbour's /32> dev <iface> onlink`: no per-link subnets.
* **Routes** follow `Topology.route()`: each link on the route of every ordered host pair gives its source
  node a /32 route to the destination. D-mod-K routes depend on the destination only; where a next hop
  also depends on the source (ECMP), per-source tables and `ip rule from <src>` hold the exceptions.
* **Bandwidth**: each veth end's egress gets a `tbf` at its directed link's bandwidth / D (tbf, not htb: one
  rate per interface needs no classes). Bucket (burst) = max(rate * 2 ms, 128 KiB): tbf refills only when
  its hrtimer fires, so a bucket shorter than the wake-up jitter of a busy box loses rate (measured at
  200 Mbit/s: 4 KiB -2 %, 32 KiB -0.7 %), and it must hold a 64 KiB GSO packet whole (62.5 KB at 1 Gbit/s:
  -20 %). The cost: a message smaller than the burst, after idle, passes unshaped. Queue limit =
  max(rate * 10 ms, 2 * burst). tbf counts frames without preamble/FCS: TCP payload gets rate * 1448/1514.
* **Latency is NOT emulated**: this kernel has no netem (nor fq, which could honour BPF-set departure
  times). Links carry only the machine's veth/forwarding latency; `build_cluster` measures it (ICMP from
  host 0 to every host) and records `hop_latency_s` for validation runs of the simulator.
* **Time dilation D**: rates are divided by D, so transfers take D times longer than on the real fabric:
  divide measured times by D, multiply bandwidths by D (`presets.undilate_time`). The bandwidth part is
  then exact; base latency and CPU time shrink by D too (a fabric with per-link latency hop_latency_s / D).

Try it: `sudo fabriclab emu up --topology fat-tree --hosts 8 --hosts-per-leaf 4 --bisection 1/2 --link 1Gbps`.
"""

from __future__ import annotations

import math
import signal
import threading
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator

import numpy as np

import fabriclab.emu.netns as netns
from fabriclab.emu.launch import hop_latency, ping_hosts
from fabriclab.emu.state import (ClusterState, EmuHost, EmuLink, clear_state, cluster_lock, load_state, name_tag,
                                 private_state_path, save_state)
from fabriclab.fabric.scenario import TopologySpec, build_topology
from fabriclab.fabric.topology import Topology

BURST_S = 2e-3
MIN_BURST_BYTES = 128 * 1024
QUEUE_S = 10e-3
MAX_NAMESPACES = 512
# What tc's tbf can hold (iproute2 6.1 on this kernel, tried with `tc qdisc add ... tbf`): burst and limit
# are 32-bit byte counts (larger is "illegal value"), and the time the burst takes at the rate is kept in
# 32-bit psched ticks of 64 ns (/proc/net/psched), so a burst over 2^32 * 64 ns = 275 s silently wraps
# (128 KiB at 1 kbit/s became a 27992 B bucket). With the default burst and queue this shapes dilated rates
# from 3.9 kbit/s to 3.4 Tbit/s.
MAX_TC_BYTES = (1 << 32) - 1
MAX_TC_BURST_S = ((1 << 32) - 1) * 64e-9
_SYSCTLS = {"net/ipv4/ip_forward": "1", "net/ipv4/conf/all/rp_filter": "0",
            "net/ipv4/conf/default/rp_filter": "0", "net/ipv6/conf/all/disable_ipv6": "1",
            "net/ipv6/conf/default/disable_ipv6": "1"}


@dataclass(frozen=True, kw_only=True)
class EmuConfig:
    """How to emulate a topology (the topology itself is a TopologySpec)."""

    dilation: float = 1.0
    """Time dilation D >= 1: every link runs at bandwidth / D."""
    burst_s: float = BURST_S
    """tbf bucket as time at the link's rate (floor MIN_BURST_BYTES); see the module docstring."""
    queue_s: float = QUEUE_S
    """tbf queue limit as time at the link's rate (floor twice the burst)."""
    measure_rtt: bool = True
    """Ping every host from host 0 after building and record the base RTT and per-link latency."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.dilation) and self.dilation >= 1):
            raise ValueError(f"dilation {self.dilation}: give D >= 1 (links run at bandwidth / D)")
        if not self.burst_s > 0 or not self.queue_s > 0:
            raise ValueError(f"burst {self.burst_s} s and queue {self.queue_s} s must both be > 0, e.g. 2ms")


@dataclass(frozen=True, kw_only=True)
class Plan:
    """Everything `build_cluster` will create, as data (no system calls): testable without root."""

    topology: Topology
    """The topology emulated."""
    namespaces: tuple[str, ...]
    """Namespace of every node, in node order."""
    addresses: tuple[str, ...]
    """/32 address of every node."""
    links: tuple[EmuLink, ...]
    """Every cable: veth ends, rates, tbf parameters."""
    iface: tuple[str, ...]
    """Per directed link: the interface at its source node."""
    main: dict = field(repr=False)
    """node -> {dst: directed link} of the node's main-table /32 routes."""
    by_source: dict = field(repr=False)
    """node -> {src: {dst: link}}: where the route from src leaves the node by another link (policy rules)."""

    @property
    def routing(self) -> str:
        """`destination` when /32 routes per destination suffice, `source` when policy rules are needed."""
        return "source" if any(self.by_source.values()) else "destination"

    def next_link(self, node: int, src: int, dst: int) -> int | None:
        """The link a packet from src to dst leaves `node` by, as the kernel will look it up."""
        found = self.by_source.get(node, {}).get(src, {}).get(dst)
        return self.main.get(node, {}).get(dst) if found is None else found

    def ifaces(self, node: int) -> list[str]:
        """The node's interfaces in cable order; the first carries the node's address."""
        ns = self.namespaces[node]
        return [c.a_iface if c.a == ns else c.b_iface for c in self.links if ns in (c.a, c.b)]

    def ip_lines(self, node: int) -> list[str]:
        """`ip -batch` lines for one namespace: loopback, address, interfaces up, routes, rules."""
        t, ifaces = self.topology, self.ifaces(node)
        lines = ["link set lo up", f"addr add {self.addresses[node]}/32 dev {ifaces[0] if ifaces else 'lo'}"]
        lines += [f"link set {name} up" for name in ifaces]

        def route(dst: int, link: int, table: str = "") -> str:
            return (f"route add {self.addresses[dst]}/32 via {self.addresses[int(t.link_dst[link])]} "
                    f"dev {self.iface[link]} onlink{table}")

        lines += [route(d, link) for d, link in sorted(self.main.get(node, {}).items())]
        for s, routes in sorted(self.by_source.get(node, {}).items()):
            lines += [route(d, link, f" table {1000 + s}") for d, link in sorted(routes.items())]
            lines.append(f"rule add from {self.addresses[s]}/32 lookup {1000 + s} pref {1000 + s}")
        return lines

    def tc_lines(self, node: int) -> list[str]:
        """`tc -batch` lines for one namespace: a tbf root qdisc on each of its veth ends."""
        ns, lines = self.namespaces[node], []
        for c in self.links:
            for end, (name, iface) in enumerate(((c.a, c.a_iface), (c.b, c.b_iface))):
                if name == ns:
                    lines.append(f"qdisc add dev {iface} root tbf rate {round(c.rate_Bps[end] * 8)}bit "
                                 f"burst {c.burst_bytes[end]} limit {c.limit_bytes[end]}")
        return lines


def node_address(node: int, num_endpoints: int) -> str:
    """Hosts 10.77.0.1, 10.77.0.2, ...; switches 10.77.128.1, ... (250 per /24, no .0 or .255)."""
    base, i = (0, node) if node < num_endpoints else (128, node - num_endpoints)
    return f"10.77.{base + i // 250}.{i % 250 + 1}"


def node_namespace(node: int, num_endpoints: int, tag: str = "") -> str:
    """Host `node`, or switch `node - num_endpoints`, of the cluster tagged `tag` (`state.name_tag`)."""
    if node < num_endpoints:
        return netns.host_namespace(tag, node)
    return netns.switch_namespace(tag, node - num_endpoints)


def shaping(rate_Bps: float, config: EmuConfig) -> tuple[int, int]:
    """(burst, limit) in bytes of the tbf that shapes a link to `rate_Bps` (already dilated)."""
    burst = max(math.ceil(rate_Bps * config.burst_s), MIN_BURST_BYTES)
    return burst, max(math.ceil(rate_Bps * config.queue_s), 2 * burst)


def check_shaping(topology: Topology, config: EmuConfig) -> None:
    """Raise ValueError, before anything is built, if tbf cannot shape a link at bandwidth / dilation."""
    if config.burst_s >= MAX_TC_BURST_S:
        raise ValueError(f"--burst {config.burst_s:g} s: tc's tbf holds at most {MAX_TC_BURST_S:.0f} s of burst; "
                         f"give a smaller --burst, e.g. 2ms")
    for bandwidth_Bps in sorted({float(b) for b in topology.bandwidth_Bps}):
        rate_Bps = bandwidth_Bps / config.dilation
        burst, limit = shaping(rate_Bps, config)
        if burst / rate_Bps > MAX_TC_BURST_S or max(burst, limit) > MAX_TC_BYTES:
            low_Bps = MIN_BURST_BYTES / MAX_TC_BURST_S
            high_Bps = MAX_TC_BYTES / max(config.queue_s, 2 * config.burst_s)
            raise ValueError(f"links of {_bits(bandwidth_Bps)} / dilation {config.dilation:g} = {_bits(rate_Bps)}: "
                             f"tc's tbf shapes {_bits(low_Bps)} to {_bits(high_Bps)} with this --burst and "
                             f"--queue; change --link or --dilation (or --burst and --queue)")


def _bits(rate_Bps: float) -> str:
    for scale, unit in ((1e15, "Pbit/s"), (1e12, "Tbit/s"), (1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if rate_Bps * 8 >= scale:
            return f"{rate_Bps * 8 / scale:.3g} {unit}"
    return f"{rate_Bps * 8:.3g} bit/s"


def _check_one_rank_per_host(gpus_per_server: int) -> None:
    if gpus_per_server != 1:
        raise ValueError(f"the emulator runs one rank per host namespace: use gpus_per_server 1, not "
                         f"{gpus_per_server}")


def check_spec(spec: TopologySpec) -> None:
    """Before building anything: a spec the emulator cannot run raises ValueError saying why."""
    _check_one_rank_per_host(spec.gpus_per_server)
    if spec.num_hosts > MAX_NAMESPACES:
        raise ValueError(f"{spec.num_hosts} hosts: the emulator makes at most {MAX_NAMESPACES} namespaces "
                         f"(hosts and switches); use fewer --hosts, or `fabriclab simulate` for large fabrics")


def make_plan(topology: Topology, config: EmuConfig, *, tag: str = "") -> Plan:
    """Names (tagged `tag`), addresses, cables, shaping and routes for `topology`; ValueError if it cannot be
    emulated."""
    t = topology
    _check_one_rank_per_host(t.gpus_per_server)
    if t.num_nodes > MAX_NAMESPACES:
        raise ValueError(f"{t.name} has {t.num_nodes} nodes; the emulator makes at most {MAX_NAMESPACES} "
                         f"namespaces: use fewer --hosts, or `fabriclab simulate` for large fabrics")
    check_shaping(t, config)
    n = t.num_endpoints
    names = tuple(node_namespace(v, n, tag) for v in range(t.num_nodes))
    pending: dict[tuple[int, int], list[int]] = defaultdict(list)
    pairs = []
    for link in range(t.num_links):
        u, v = int(t.link_src[link]), int(t.link_dst[link])
        if pending[(v, u)]:
            pairs.append((pending[(v, u)].pop(0), link))
        else:
            pending[(u, v)].append(link)
    unpaired = [link for links in pending.values() for link in links]
    if unpaired:
        raise ValueError(f"link {t.link_name(unpaired[0])} of {t.name} has no reverse link: the emulator "
                         f"builds full-duplex cables only")
    iface = [""] * t.num_links
    seen: dict[tuple[int, int], int] = defaultdict(int)
    links = []
    for ab, ba in sorted(pairs):
        a, b = int(t.link_src[ab]), int(t.link_dst[ab])
        k = seen[(min(a, b), max(a, b))]
        seen[(min(a, b), max(a, b))] += 1
        iface[ab], iface[ba] = (names[b] + (f"-{k}" if k else ""), names[a] + (f"-{k}" if k else ""))
        assert max(len(iface[ab]), len(iface[ba])) <= netns.IFNAME_MAX
        rates = (float(t.bandwidth_Bps[ab]) / config.dilation, float(t.bandwidth_Bps[ba]) / config.dilation)
        (burst_a, limit_a), (burst_b, limit_b) = shaping(rates[0], config), shaping(rates[1], config)
        links.append(EmuLink(a=names[a], a_iface=iface[ab], b=names[b], b_iface=iface[ba],
                             names=(t.link_name(ab), t.link_name(ba)), rate_Bps=rates,
                             burst_bytes=(burst_a, burst_b), limit_bytes=(limit_a, limit_b)))
    main, by_source = _route_tables(t)
    return Plan(topology=t, namespaces=names, addresses=tuple(node_address(v, n) for v in range(t.num_nodes)),
                links=tuple(links), iface=tuple(iface), main=main, by_source=by_source)


def _route_tables(t: Topology) -> tuple[dict, dict]:
    n = t.num_endpoints
    src, dst = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    src, dst = src[src != dst], dst[src != dst]
    offsets, route_links = t.routes(src, dst)
    choices: dict[int, dict[int, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))  # node, dst, src
    for i, (s, d) in enumerate(zip(src.tolist(), dst.tolist())):
        for link in route_links[offsets[i]:offsets[i + 1]].tolist():
            if choices[int(t.link_src[link])][d].setdefault(s, link) != link:
                raise ValueError(f"route {s}->{d} of {t.name} passes node {t.node_names[t.link_src[link]]} "
                                 f"twice: the emulator needs loop-free routes")
    main: dict[int, dict[int, int]] = {}
    by_source: dict[int, dict[int, dict[int, int]]] = {}
    for u, per_dst in choices.items():
        # The main table holds the node's own choice (its traffic as a source), else the lowest source's.
        main[u] = {d: by_src.get(u, by_src[min(by_src)]) for d, by_src in per_dst.items()}
        for d, by_src in per_dst.items():
            for s, link in by_src.items():
                if link != main[u][d]:
                    by_source.setdefault(u, {}).setdefault(s, {})[d] = link
    return main, by_source


def build_cluster(spec: TopologySpec, config: EmuConfig = EmuConfig(), *,
                  state_file: Path | None = None) -> ClusterState:
    """Remove what is left of this state file's cluster, build the emulated cluster, measure its base RTT,
    write the state file (default: `state_path()`). Other state files' clusters are left alone.

    The caller should hold `cluster_lock()` (the CLI and `emulated_cluster` do)."""
    check_spec(spec)
    netns.check_system()
    plan = make_plan(build_topology(spec), config, tag=name_tag(state_file))
    teardown_cluster(state_file=state_file)
    try:
        netns.batch("ip", [f"netns add {name}" for name in plan.namespaces])
        for name in plan.namespaces:
            netns.set_sysctls(name, _SYSCTLS)
        netns.batch("ip", [f"link add {c.a_iface} netns {c.a} type veth peer name {c.b_iface} netns {c.b}"
                           for c in plan.links])
        for node, name in enumerate(plan.namespaces):
            netns.batch("ip", plan.ip_lines(node), ns=name)
            netns.batch("tc", plan.tc_lines(node), ns=name)
        n = plan.topology.num_endpoints
        hosts = tuple(EmuHost(rank=r, namespace=plan.namespaces[r], ip=plan.addresses[r],
                              iface=(plan.ifaces(r) or ["lo"])[0]) for r in range(n))
        state = ClusterState(spec=spec.as_dict(), dilation=config.dilation, hosts=hosts,
                             switches=plan.namespaces[n:], links=plan.links, routing=plan.routing)
        if config.measure_rtt and n > 1:
            rtts = tuple((rank, hops, min(r for r in found if r is not None))
                         for rank, hops, found in ping_hosts(state, plan.topology, count=5)
                         if any(r is not None for r in found))
            state = replace(state, rtts=rtts, hop_latency_s=hop_latency(rtts))
        save_state(state, state_file)
        return state
    except BaseException:
        teardown_cluster(state_file=state_file)
        raise


def teardown_cluster(*, state_file: Path | None = None, every_cluster: bool = False) -> list[str]:
    """Remove the cluster of `state_file` (default: `state_path()`): the namespaces and root links with its
    tag, the file there or not, and those the file lists; or, with `every_cluster`, every emulated cluster on
    this machine, whoever made it. Returns what was removed."""
    netns.check_system()
    tag = None if every_cluster else name_tag(state_file)
    removed = netns.our_namespaces(tag)
    state = load_state(state_file)
    if state is not None:  # a file written elsewhere, then moved: its names need not carry its tag
        live = set(netns.list_netns())
        removed += [n for n in state.namespaces if netns.OUR_NAME.match(n) and n in live and n not in removed]
    for name in removed:
        netns.delete_netns(name)
    for name in netns.our_root_links(tag):
        netns.delete_link(name)
        removed.append(name)
    clear_state(state_file)
    return removed


def _raise_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def emulated_cluster(spec: TopologySpec, dilation: float = 1.0, *, config: EmuConfig | None = None,
                     state_file: Path | None = None, lock_timeout_s: float = 120.0) -> Iterator[ClusterState]:
    """Build the cluster, yield its state, and always tear it down: on return, exception, Ctrl-C and (in
    the main thread) SIGTERM / SIGHUP, which raise SystemExit(128 + signal) while the cluster is up unless the
    program handles them itself (the CLI raises KeyboardInterrupt on SIGTERM, as on Ctrl-C).
    `dilation` is used when no `config` is given (a config carries its own). Without `state_file` the cluster
    gets one of this process's own (`private_state_path`), so neither its build nor its teardown touches the
    cluster of `emu up` or of another program."""
    if config is not None and dilation not in (1.0, config.dilation):
        raise ValueError(f"dilation {dilation} and config.dilation {config.dilation} differ: give only one")
    config = config or EmuConfig(dilation=dilation)
    state_file = state_file or private_state_path()
    main = threading.current_thread() is threading.main_thread()
    with cluster_lock(lock_timeout_s):
        sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if main else ()
        saved = {sig: signal.getsignal(sig) for sig in sigs}
        for sig in saved.keys() - {signal.SIGINT}:
            if saved[sig] in (signal.SIG_DFL, None):  # a program's own handler stays (the CLI's: SIGTERM as Ctrl-C)
                signal.signal(sig, _raise_exit)
        try:
            yield build_cluster(spec, config, state_file=state_file)
        finally:
            for sig in saved:  # a second signal must not cut the teardown short
                signal.signal(sig, signal.SIG_IGN)
            try:
                teardown_cluster(state_file=state_file)
            finally:
                for sig, handler in saved.items():
                    signal.signal(sig, handler)
