"""The network of one plan option: a radix-true fat tree of the servers' NICs, and what the plan refuses.

**NICs and servers.** A server of g GPUs and K NICs (`NodeSpec.nics_per_server`, K divides g) puts
g / K GPUs behind each NIC; the tree's hosts are the NICs (K per server), so each GPU's share of the
network is K / g of a NIC. A plain fat tree keeps a server's NICs under one leaf (consecutive hosts);
rail-optimised (`NodeSpec.rails`) puts NIC j of every server on rail j: the hosts are ordered rail by
rail, and the ranks of a server are placed on its K NICs in rails (`rail_placement`). The simulator
carries traffic between two NICs of one server over the network (a real server would use NVLink or
PCIe): with a server's NICs on one leaf that costs a leaf hop, on rails a spine hop. The simulated
schedules are one channel: a ring crosses each server boundary with one flow, so more NICs do not speed
it up here (NCCL spreads its channels over the NICs); algorithms whose GPUs send at once (butterfly,
trees at their leaves) and the library's choice (`grid_cluster` knows the NICs) do see them.

**Radix.** The tree has the levels the switch radix forces and leaves as full as the hosts divide
(`fabric/switches.py`); `--levels` asks for a number of levels, which is skipped with the reason when the
radix does not allow it. The bill counts whole switches (`plan/bill.py`).

**Schedule size.** Algorithms without an array form (all but ring and the parameter server) are
simulated message by message; `check_schedule_size` estimates the messages from two small builds and
refuses, before any work, a schedule over MAX_MESSAGES (hierarchical ring/ring, group 8: 588k messages
at 4,096 GPUs, 31 s; at 16,384 GPUs ~9 M, more than 15 minutes and 4.8 GB).

Try it: `fabriclab plan --gpus 16384 --gpus-per-server 8 --nics-per-server 8 --fabrics 400g-ndr --bisection 1`.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from fabriclab.fabric.fattree import fat_tree, star
from fabriclab.fabric.placement import place
from fabriclab.fabric.switches import TreeChoice, default_radix, tree_for

MAX_MESSAGES = 1_500_000
"""Most messages of a schedule simulated message by message (module doc)."""
_PROBE_RANKS = (256, 1024)


def option_tree(node, fabric: str, gpus: int, ratio: Fraction, levels: int | None, radix: int | None,
                hosts_per_leaf: int | None) -> TreeChoice:
    """The tree of one option: the fewest levels the radix allows (or `levels`), the leaves and pods."""
    radix = radix or default_radix(fabric)
    nics = gpus // node.gpus_per_server * node.nics_per_server
    if hosts_per_leaf is None:
        try:
            return tree_for(nics, radix, ratio, levels)
        except ValueError as exc:
            if "split evenly" not in str(exc):
                raise
            raise ValueError(_uneven(node, gpus, nics, radix, ratio, levels)) from None
    k = hosts_per_leaf
    if nics <= k and levels is None:
        return TreeChoice(levels=1, hosts_per_leaf=nics, radix=max(radix, nics))
    ups = k if levels == 3 else k * ratio
    if k + ups > radix:
        raise ValueError(f"--hosts-per-leaf {k} at bisection {ratio} needs leaves of {k + ups} ports, more than "
                         f"the radix {radix}: use --hosts-per-leaf {int(radix / (1 + ratio))} or less, or --radix")
    chosen = levels or (2 if nics <= radix * k else 3)
    return TreeChoice(levels=chosen, hosts_per_leaf=k, leaves_per_pod=k if chosen == 3 else None, radix=radix)


def _fits(node, gpus: int, radix: int, ratio: Fraction, levels: int | None) -> bool:
    try:
        tree_for(gpus // node.gpus_per_server * node.nics_per_server, radix, ratio, levels)
        return True
    except ValueError:
        return False


def _uneven(node, gpus: int, nics: int, radix: int, ratio: Fraction, levels: int | None) -> str:
    """Why `gpus` GPUs do not make a tree, with the nearest GPU counts and the bisections that do."""
    g = node.gpus_per_server
    down = next((n for n in range(gpus - g, g - 1, -g) if _fits(node, n, radix, ratio, levels)), None)
    up = next((n for n in range(gpus + g, 4 * gpus + g, g) if _fits(node, n, radix, ratio, levels)), None)
    counts = " or ".join(str(n) for n in (down, up) if n is not None)
    ratios = [str(r) for r in (Fraction(1), Fraction(1, 2), Fraction(1, 4), Fraction(1, 8))
              if r != ratio and _fits(node, gpus, radix, r, levels)]
    return (f"{nics} NICs ({gpus} GPUs) do not split into whole leaves of {radix}-port switches at bisection "
            f"{ratio} (a leaf's NICs must divide the NICs, and its up-links, NICs x bisection, be whole): "
            + (f"use --gpus {counts}" if counts else "use another GPU count")
            + (f", or --bisection {' or '.join(ratios)}" if ratios else ""))


def build_network(node, fabric: str, gpus: int, tree: TreeChoice, ratio: Fraction):
    """The topology of `tree` with the servers of `node` (module doc)."""
    nics = gpus // node.gpus_per_server * node.nics_per_server
    common = dict(link=fabric, gpus_per_server=node.gpus_per_server // node.nics_per_server, pcie=node.pcie,
                  nvlink=node.nvlink)
    if tree.levels == 1:
        return star(hosts=nics, **common)
    return fat_tree(levels=tree.levels, hosts=nics, hosts_per_leaf=tree.hosts_per_leaf, bisection=ratio,
                    leaves_per_pod=tree.leaves_per_pod, **common)


def rail_placement(gpus: int, node) -> np.ndarray:
    """Endpoint of each rank on a rail-optimised tree: GPU i of server s sits behind NIC j = i // (g/K),
    host j * servers + s."""
    g, k = node.gpus_per_server, node.nics_per_server
    per_nic, servers = g // k, gpus // g
    rank = np.arange(gpus, dtype=np.int64)
    s, i = rank // g, rank % g
    return ((i // per_nic) * servers + s) * per_nic + i % per_nic


def option_placement(gpus: int, topo, node, policy: str) -> np.ndarray:
    """Ranks on endpoints: `policy` on the NICs, or the rails' order."""
    if node.rails and node.nics_per_server > 1:
        if policy != "linear":
            raise ValueError(f"--placement {policy} with --rails: rails place a server's GPUs on its NICs; "
                             f"leave --placement out")
        return rail_placement(gpus, node)
    return place(gpus, topo, policy)


def check_schedule_size(algo: str, gpus: int) -> None:
    """Refuse `algo` on `gpus` ranks when its schedule would be too large to simulate (module doc)."""
    from fabriclab.collectives import vectorized
    from fabriclab.collectives.registry import build_schedule

    if gpus <= _PROBE_RANKS[-1] or vectorized.rounds("allreduce", algo, gpus, 1 << 26) is not None:
        return
    counts = [build_schedule("allreduce", algo, n, 1 << 22).num_messages for n in _PROBE_RANKS]
    slope = max(1.0, math.log(counts[1] / max(counts[0], 1)) / math.log(_PROBE_RANKS[1] / _PROBE_RANKS[0]))
    estimate = counts[1] * (gpus / _PROBE_RANKS[1]) ** slope
    if estimate > MAX_MESSAGES:
        raise ValueError(f"--algo {algo} on {gpus:,} GPUs: its schedule has about {estimate / 1e6:.1f} million "
                         f"messages ({counts[1]:,} at 1,024 GPUs), simulated one by one: that runs for many "
                         f"minutes and gigabytes (plan refuses over {MAX_MESSAGES / 1e6:g} million); use the "
                         f"default (nccl: NCCL's own choice of ring or tree), ring or double-binary-tree, or "
                         f"fewer GPUs")
