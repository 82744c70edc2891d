"""`fabriclab emu`: an emulated cluster in this Linux box (needs root): up, run, status, down.

`up` builds hosts and switches as network namespaces with tbf-shaped veth cables and routes that follow
the simulator's (see `fabriclab.emu.cluster`), `run` starts one process per host with RANK, WORLD_SIZE,
MASTER_ADDR..., `status` pings every host from host 0, `down` removes the cluster (also after a crash). A
cluster is known by its state file ($FABRICLAB_EMU_STATE, default /run/fabriclab/emu.json): `down` removes
that file's cluster only, never another user's or program's (`down --all` removes every one).
Latency is not emulated (no netem in this kernel): `up` measures and prints the base latency instead.

Try it: `sudo fabriclab emu up --topology fat-tree --hosts 8 --hosts-per-leaf 4 --bisection 1/2 --link 1Gbps`,
then `sudo fabriclab emu run -- python -c "import os; print(os.environ['RANK'])"` and `sudo fabriclab emu down`.
"""

from __future__ import annotations

import functools
import sys
import threading
from typing import Any, Callable, List, Optional, TypeVar

import typer
from rich.table import Table

from fabriclab.cli.common import (
    EXIT_FAILED,
    FormatOption,
    JsonOption,
    Output,
    StoreOption,
    check_output_path,
    err_console,
    print_error,
    user_errors,
)
from fabriclab.cli.options import (
    EMU_DEFAULT_LINK,
    BisectionOption,
    DimsOption,
    EcmpSeedOption,
    HostsOption,
    HostsPerLeafOption,
    LatencyOption,
    LeavesPerPodOption,
    LevelsOption,
    LinkOption,
    TOPOLOGY,
    RoutingOption,
    SpinesOption,
    TopologyOption,
    parse_count,
    parse_number,
)
from fabriclab.emu import netns
from fabriclab.emu.launch import DEFAULT_MASTER_PORT
from fabriclab.emu.presets import DEFAULT_SCALE, FABRIC_PRESET_NAMES

app = typer.Typer(help="Emulated cluster in this box (root): namespaces as hosts, shaped links, launcher.",
                  no_args_is_help=True, rich_markup_mode=None)
F = TypeVar("F", bound=Callable[..., Any])


def register(main_app: typer.Typer) -> None:
    main_app.add_typer(app, name="emu")


def _emu_errors(command: F) -> F:
    """A failed system command (EmuError) becomes one red `error:` line and exit code 1."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except netns.EmuError as exc:
            print_error(exc)
            raise typer.Exit(EXIT_FAILED) from None

    return wrapper  # type: ignore[return-value]


def _check_state_file() -> None:
    """Before any namespace is touched, and before root is asked for: the state file must be a file that
    can be written (`$FABRICLAB_EMU_STATE` naming a folder gave a traceback after the teardown)."""
    from fabriclab.emu.state import STATE_ENV, state_path

    check_output_path(state_path(), f"the state file (${STATE_ENV})")


def _rate(Bps: float) -> str:
    for scale, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if Bps * 8 >= scale:
            return f"{Bps * 8 / scale:.4g} {unit}"
    return f"{Bps * 8:.4g} bit/s"


def _us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.3g} us"


@app.command("up")
@user_errors
@_emu_errors
def up_cmd(
    topology: TopologyOption = "fat-tree",
    hosts: HostsOption = None,
    levels: LevelsOption = "2",
    hosts_per_leaf: HostsPerLeafOption = None,
    bisection: BisectionOption = "1",
    leaves_per_pod: LeavesPerPodOption = None,
    spines: SpinesOption = "4",
    dims: DimsOption = None,
    link: LinkOption = None,
    latency: LatencyOption = None,
    routing: RoutingOption = "dmodk",
    seed: EcmpSeedOption = "0",
    dilation: Optional[str] = typer.Option(None, metavar="D", help="Time dilation D >= 1: links run at "
                                                                     "bandwidth / D."),
    preset: Optional[str] = typer.Option(None, help=f"Fabric preset: {', '.join(FABRIC_PRESET_NAMES)}."),
    scale: Optional[str] = typer.Option(None, help=f"With --preset: link rate scale (default {DEFAULT_SCALE}); "
                                                   f"the dilation is 1/scale."),
    burst: str = typer.Option("2ms", help="tbf bucket as time at the link rate (floor 128 KiB)."),
    queue: str = typer.Option("10ms", help="tbf queue limit as time at the link rate."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """Build the emulated cluster (anything stale is removed first).

    The default link is 1 Gbit/s, a rate this machine can shape; latency is recorded, not emulated."""
    from fabriclab.emu.up import bring_up, emu_config, up_record
    from fabriclab.units import parse_time

    out = Output(fmt, json_path, store)
    _check_state_file()
    _check_up_options(hosts, link, dilation, preset, scale)
    spec = TOPOLOGY.build(locals(), link=link or EMU_DEFAULT_LINK)
    spec, config = emu_config(spec, dilation=_dilation(dilation), preset=preset, scale=scale,
                              keep_latency=latency is not None, burst_s=parse_time(burst), queue_s=parse_time(queue))
    topo, state = bring_up(spec, config)
    _print_up(out, topo, state, config)
    out.record("emu.up", *up_record(spec, config, state))


def _check_up_options(hosts: str | None, link: str | None, dilation: str | None, preset: str | None,
                      scale: str | None) -> None:
    """Options of `emu up` that exclude each other, and a host count beyond the emulator's namespaces."""
    from fabriclab.emu.cluster import MAX_NAMESPACES

    if preset is not None and (link is not None or dilation is not None):
        raise ValueError("--preset sets the link and the dilation (1/--scale): drop --link and --dilation")
    if preset is None and scale is not None:
        raise ValueError("--scale goes with --preset; without a preset give --dilation D instead")
    if hosts is not None and parse_count(hosts, "--hosts") > MAX_NAMESPACES:
        raise ValueError(f"--hosts {hosts}: the emulator makes at most {MAX_NAMESPACES} namespaces (hosts and "
                         f"switches); use fewer hosts, or `fabriclab simulate` for large fabrics")


def _dilation(text: str | None) -> float | None:
    """`--dilation D`, D >= 1 (None when not given)."""
    value = None if text is None else parse_number(text, "--dilation", minimum=0.0, example="100")
    if value is not None and value < 1:
        raise ValueError(f"--dilation {text}: give D >= 1 (links run at bandwidth / D), e.g. 100")
    return value


def _print_up(out: Output, topo, state, config) -> None:
    """The hosts table and what the links, the latency and the dilation mean for measurements."""
    from fabriclab.emu.state import state_path
    from fabriclab.emu.up import link_shapes

    out.note(f"emulated cluster up: {topo.name}: {len(state.hosts)} hosts, {len(state.switches)} "
             f"switch{'es' if len(state.switches) != 1 else ''} (forwarding namespaces), {len(state.links)} "
             f"cables; routes: {state.routing}-based /32, identical to Topology.route()")
    table = Table(title="hosts")
    for col in ("rank", "namespace", "address", "iface", "links from rank 0", "base RTT"):
        table.add_column(col, justify="right")
    rtt = {rank: (hops, r) for rank, hops, r in state.rtts}
    for h in state.hosts:
        hops, r = rtt.get(h.rank, (0, None))
        table.add_row(str(h.rank), h.namespace, h.ip, h.iface, str(hops), _us(r))
    out.table(table)
    for emulated, burst_b, limit_b in link_shapes(state):
        out.note(f"links: {_rate(emulated * config.dilation)} / D={config.dilation:g} -> {_rate(emulated)} "
                 f"per direction, tbf burst {burst_b} B, limit {limit_b} B")
    bound = "at most " if len({hops for _, hops, _ in state.rtts}) == 1 else ""
    out.note(f"latency: NOT emulated (this kernel has no netem); the spec's per-link latency "
             f"{_us(float(topo.latency_s[0]) if topo.num_links else None)} is recorded only. Measured base "
             f"latency per link: {bound}{_us(state.hop_latency_s)} (dilated), "
             f"{_us(state.hop_latency_s / config.dilation if state.hop_latency_s is not None else None)} "
             f"un-dilated: validate against a simulation with that --latency.")
    out.note(f"dilation D={config.dilation:g}: divide measured times by D (multiply bandwidths by D) for the "
             f"real fabric. State: {state_path()}. Next: `fabriclab emu run -- CMD`, `fabriclab emu down`.")


@app.command("run")
@user_errors
@_emu_errors
def run_cmd(
    command: List[str] = typer.Argument(..., help="The command to run on every host, after `--`."),
    timeout: Optional[str] = typer.Option(None, metavar="SECONDS",
                                          help="Kill all ranks after this many seconds (exit 124)."),
    # The name given, not derived: typer 0.27.2 derived `--PORT` from this option (`--port` was unknown).
    port: str = typer.Option(str(DEFAULT_MASTER_PORT), "--port", metavar="PORT", help="MASTER_PORT (1024..65535)."),
    rank0_only: bool = typer.Option(False, "--rank0-only", help="Stream only rank 0's output (a failed "
                                                                "rank's tail is shown anyway)."),
    launcher: str = typer.Option("direct", help="direct (COMMAND is the rank, one per host) or torchrun (a "
                                                "torchrun agent per host, c10d rendezvous at host 0; output "
                                                "and exit codes per host)."),
    nproc_per_host: str = typer.Option("1", metavar="K", help="Processes per host (--launcher torchrun)."),
) -> None:
    """Run COMMAND once per emulated host with the torchrun-style environment; exit with rank 0's code."""
    from fabriclab.emu.launch import exit_code, first_failure, run_in_cluster

    master_port = parse_count(port, "--port", minimum=1024, maximum=65535)
    timeout_s = None if timeout is None else parse_number(timeout, "--timeout", minimum=0.001, example="60")
    lock = threading.Lock()

    def show(rank: int, line: str) -> None:
        if rank == 0 or not rank0_only:
            with lock:
                sys.stdout.write(f"[{rank}] {line}\n")
                sys.stdout.flush()

    try:
        results = run_in_cluster(command, timeout_s, master_port=master_port, on_line=show, launcher=launcher.strip(),
                                 nproc_per_host=parse_count(nproc_per_host, "--nproc-per-host", maximum=1024))
    except KeyboardInterrupt:
        err_console.print("interrupted: every rank was killed", style="red")
        raise typer.Exit(130) from None
    bad = first_failure(results)
    if bad is None:
        print(f"all {len(results)} ranks exited 0 (slowest {max(r.elapsed_s for r in results):.2f} s)", flush=True)
    else:
        stopped = [str(r.rank) for r in results if r.status in ("killed", "timeout") and r is not bad]
        what = (f"timed out after {timeout_s:g} s" if bad.status == "timeout"
                else f"failed with exit code {bad.returncode} after {bad.elapsed_s:.2f} s")
        err_console.print(f"rank {bad.rank} ({bad.namespace}) {what}"
                          + (f"; stopped ranks {', '.join(stopped)}" if stopped else ""), style="red")
        if rank0_only and bad.rank != 0:
            for line in bad.output.splitlines()[-20:]:
                err_console.print(f"[{bad.rank}] {line}", markup=False)
    raise typer.Exit(exit_code(results))


@app.command("down")
@user_errors
@_emu_errors
def down_cmd(
    every_cluster: bool = typer.Option(False, "--all", help="Remove every emulated cluster on this machine, "
                                                            "also other users' and programs' (strays of a "
                                                            "killed run)."),
) -> None:
    """Remove the namespaces and links of the cluster of the state file, with or without the file itself."""
    from fabriclab.emu.cluster import teardown_cluster
    from fabriclab.emu.state import cluster_lock, state_path

    _check_state_file()
    netns.check_system()
    with cluster_lock():
        removed = teardown_cluster(every_cluster=every_cluster)
    if removed:
        print(f"removed {len(removed)}: {' '.join(removed)}", flush=True)
    else:
        whose = "on this machine" if every_cluster else f"of {state_path()}"
        print(f"nothing to remove (no emulated cluster {whose})", flush=True)
    others = [] if every_cluster else netns.our_namespaces()
    if others:  # said, not removed: they belong to other state files
        print(f"left alone: {len(others)} namespaces of other emulated clusters (`fabriclab emu down --all` "
              f"removes them too)", flush=True)


@app.command("status")
@user_errors
@_emu_errors
def status_cmd(
    count: str = typer.Option("3", metavar="N", help="Pings per host (1..100)."),
    fmt: FormatOption = None,
    json_path: JsonOption = None,
    store: StoreOption = None,
) -> None:
    """What is up, and a ping from host 0 to every host; exit 1 when stale or unreachable."""
    from fabriclab.emu.launch import ping_hosts
    from fabriclab.emu.state import load_state, name_tag, state_path
    from fabriclab.fabric.scenario import build_topology

    out = Output(fmt, json_path, store)
    pings = parse_count(count, "--count", minimum=1, maximum=100)
    netns.check_system()
    state, ours = load_state(), netns.our_namespaces(name_tag())
    if state is None:
        if ours:
            err_console.print(f"stale: {len(ours)} namespaces ({' '.join(ours)}) but no state file "
                              f"{state_path()}: run `fabriclab emu down`", style="red")
            raise typer.Exit(EXIT_FAILED)
        out.note("no emulated cluster is up")
        return
    missing = sorted(set(state.namespaces) - set(ours))
    if missing:
        err_console.print(f"stale state file {state_path()}: namespaces {' '.join(missing)} are gone: run "
                          f"`fabriclab emu down`", style="red")
        raise typer.Exit(EXIT_FAILED)
    topo = build_topology(state.topology_spec())
    out.note(f"up: {topo.name}, dilation {state.dilation:g}, {len(state.hosts)} hosts, "
             f"{len(state.switches)} switches, built by pid {state.driver_pid}; latency not emulated")
    table = Table(title=f"ping from rank 0 ({state.hosts[0].namespace}, {state.hosts[0].ip})")
    for col in ("rank", "namespace", "address", "links", "received", "min RTT", "avg RTT"):
        table.add_column(col, justify="right")
    rows, lost = [], 0
    for rank, hops, rtts in ping_hosts(state, topo, count=pings):
        got = [r for r in rtts if r is not None]
        lost += not got
        h = state.hosts[rank]
        table.add_row(str(rank), h.namespace, h.ip, str(hops), f"{len(got)}/{len(rtts)}",
                      _us(min(got) if got else None), _us(sum(got) / len(got) if got else None))
        rows.append({"rank": rank, "links": hops, "rtts_s": rtts})
    out.table(table)
    out.record("emu.status", {"state": str(state_path())}, {"pings": rows})
    if lost:
        err_console.print(f"{lost} hosts unreachable from rank 0", style="red")
        raise typer.Exit(EXIT_FAILED)
