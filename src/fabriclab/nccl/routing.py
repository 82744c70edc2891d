"""How the fabric spreads the library's flows over its spines, and what that costs against D-mod-K.

`nccl/links.py` simulates a collective's transfers on D-mod-K routes (`ideal`: every destination's spine
fixed so that a leaf's up-links share its traffic evenly, as SimGrid routes). Real fabrics do not:

* `ecmp`: a switch hashes each flow's header (addresses, UDP source port, the destination QP) onto one of
  its equal up-links. NCCL opens a flow per channel, per peer and per QP (`network.qps_per_connection`,
  NCCL_IB_QPS_PER_CONNECTION), and keeps it for the job: a seeded draw (`network.routing_seed`) puts each
  flow on a spine, and flows that land on one up-link share it while others idle (Meta, "RDMA over Ethernet
  for Distributed AI Training at Meta Scale", SIGCOMM 2024: low flow entropy; Alibaba HPN, SIGCOMM 2024:
  hash polarisation). A synchronous ring or an all-to-all ends with its slowest flow, so the time is the
  most loaded link's: `factor = max over links of routed load / D-mod-K load's maximum`.
  With `network.hash_per_message` every message of a connection carries its own source port (SimAI's
  MockNccl; flowlet switching), so the draw changes message by message: `network.messages_in_flight`
  messages per connection are hashed at a time, a link asked for more than it carries serves them at its
  rate while another idles, and the collective moves at the mean throughput over many draws.
* `adaptive` (InfiniBand adaptive routing, Spectrum-X, packet spraying): each leaf spreads its up-traffic
  over all its up-links, whatever the flows; reordering costs what `nccl/congestion.py` says.

The factor multiplies the D-mod-K link time; it is computed on the same transfers with numpy (link loads by
`bincount`), so 8 draws of a 16,384-GPU step cost little. It holds for the two-level trees of
`fabric/rail.py` (the spine is the only choice a flow has); a third tier keeps its own model.

Try it: `python -c "from fabriclab.nccl.routing import demo; demo()"`.
"""

from __future__ import annotations

import numpy as np

from fabriclab.fabric.cluster import NetworkSpec

# Draws of a per-message hash averaged into one throughput (the spread of the mean is then about 1 %).
MESSAGE_DRAWS = 32
# Flows routed at most (an all-to-all of 2,048 GPUs has 4.2 M): beyond, a seeded sample of this many, each
# carrying its share of the rest, which moves the busiest link's load by about 1 / sqrt(flows on it).
MAX_ROUTED_FLOWS = 1 << 19


def _link_time(topo, offsets: np.ndarray, links: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """Per link: the rates of the flows routed over it, over its bandwidth (its utilisation)."""
    per_entry = np.repeat(rate, np.diff(offsets))
    return np.bincount(links, weights=per_entry, minlength=topo.num_links) / topo.bandwidth_Bps


def _flow_scale(offsets: np.ndarray, links: np.ndarray, use: np.ndarray) -> np.ndarray:
    """Each flow's rate as a share of what it asks: the tightest link on its route (1 where none is full)."""
    scale = 1.0 / np.maximum(use, 1.0)
    starts = offsets[:-1]
    worst = np.minimum.reduceat(scale[links], starts) if links.size else np.ones(starts.size)
    return np.where(np.diff(offsets) > 0, worst, 1.0)


def offered_load(router, use: np.ndarray) -> np.ndarray:
    """Per link (the last axis of `use`, each row a set of flows' link times or utilisations): the load the
    spine links are offered when the flows run at what the links off the spine tier allow, over each link's
    rate (`nccl/congestion.py`'s overload); 0 off the spine tier."""
    tier = router.spine_tier
    edge = use.copy()
    edge[..., tier] = 0.0
    out = np.zeros_like(use)
    out[..., tier] = use[..., tier] / np.maximum(edge.max(axis=-1, keepdims=True), 1e-30)
    return out


def _spines(router, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Which flows change leaves (only they meet a hash)."""
    k, k_in = router.end_nics(src, dst)
    sa, sb = src // router.G, dst // router.G
    return (sa != sb) & (router.nic_leaf[sa, k] != router.nic_leaf[sb, k_in])


def route_effects(topo, src: np.ndarray, dst: np.ndarray, size_bytes: np.ndarray, network: NetworkSpec,
                  salt: int = 0) -> tuple[float, float, float]:
    """(factor, overload, link rate): the time of the transfers (all at once) routed as `network.routing`
    says, beside other jobs where the job is scattered, over their time alone on D-mod-K routes (1.0 where
    no flow has a choice of spine and no other job shares it), and the load they offer the busiest spine
    link at the rates the rest of their path allows, over its rate (`nccl/congestion.py`). `salt` separates
    the draws of different collectives."""
    router = getattr(topo, "router", None)
    if router is None or not getattr(router, "num_spines", 0):
        return 1.0, 0.0, 0.0
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    size = np.broadcast_to(np.asarray(size_bytes, dtype=np.float64), src.shape)
    if src.size > MAX_ROUTED_FLOWS:  # an all-to-all of thousands of GPUs: an unbiased sample of its flows
        keep = np.random.default_rng([salt, 0x5A4D]).choice(src.size, size=MAX_ROUTED_FLOWS, replace=False)
        src, dst, size = src[keep], dst[keep], size[keep] * (src.size / MAX_ROUTED_FLOWS)
    if not _spines(router, src, dst).any():
        return 1.0, 0.0, 0.0
    link_Bps = float(topo.bandwidth_Bps[router.spine_tier.start])
    offsets, links = router.routes(src, dst)
    ideal_use = _link_time(topo, offsets, links, size)
    offered = offered_load(router, ideal_use)
    ideal = float(ideal_use.max())
    if ideal <= 0:
        return 1.0, float(offered.max()), link_Bps
    k = others_share(network)
    if network.routing == "ideal":
        return (float(with_others(router, ideal_use / ideal, k).max()), float(with_others(router, offered, k).max()),
                link_Bps)
    if network.routing == "adaptive":
        spread = (adaptive_use(topo, router, x) for x in (ideal_use / ideal, offered))
        return (*(float(with_others(router, x, k).max()) for x in spread), link_Bps)
    factor, over = _ecmp(topo, router, src, dst, size, ideal, network, salt)
    if network.hash_per_message:
        # No link keeps its excess: the tier carries its mean load raised by what the hash loses on the flows
        # that cross it. Below its rate the tier's slack absorbs a collision (the message waits, the next
        # finds a free link); at its rate nothing does, and every collision costs the tier its time.
        mean = float(adaptive_use(topo, router, offered).max())
        over *= mean * (1.0 + k)
        factor = max(1.0, over) / max(1.0, mean)
    return factor, over, link_Bps


def others_share(network: NetworkSpec) -> float:
    """Load the other jobs of a busy cluster put on a scattered job's spine links, per unit of the job's
    own: they hold `busy_share` of the servers and are taken to load the leaves' up-links as the job does
    (so `busy / (1 - busy)`); 0 for a packed job."""
    if network.placement != "scattered":
        return 0.0
    return network.busy_share / (1.0 - network.busy_share)


def with_others(router, use: np.ndarray, k: float) -> np.ndarray:
    """Utilisations with the other jobs' load on every spine link: `k` x the mean of the job's own over the
    leaf's spine links of that direction (hashed or not, the others' flows land anywhere on the tier)."""
    if k <= 0:
        return use
    spines = router.spine_tier
    tier = use[spines].reshape(router.num_leaves, router.num_spines, 2)
    out = use.copy()
    out[spines] = (tier + k * tier.mean(axis=1, keepdims=True)).ravel()
    return out


def routing_factor(topo, src: np.ndarray, dst: np.ndarray, size_bytes: np.ndarray, network: NetworkSpec,
                   salt: int = 0) -> float:
    """The factor of `route_effects` alone."""
    return route_effects(topo, src, dst, size_bytes, network, salt)[0]


def adaptive_use(topo, router, use: np.ndarray) -> np.ndarray:
    """Utilisations with every leaf's up- (and down-) traffic spread evenly over its spine links."""
    spines = router.spine_tier
    tier = use[spines].reshape(router.num_leaves, router.num_spines, 2)
    out = use.copy()
    out[spines] = np.broadcast_to(tier.mean(axis=1, keepdims=True), tier.shape).ravel()
    return out


def _ecmp(topo, router, src, dst, size, ideal: float, network: NetworkSpec, salt: int) -> tuple[float, float]:
    """(factor, overload) of hashed paths: one draw kept for the job, or the mean over per-message draws."""
    per_message = network.hash_per_message
    copies = network.qps_per_connection * (max(1, round(network.messages_in_flight)) if per_message else 1)
    src, dst, size = np.repeat(src, copies), np.repeat(dst, copies), np.repeat(size / copies, copies)
    rate = size / ideal  # each flow's rate when all end together at the D-mod-K bottleneck
    rng = np.random.default_rng([network.routing_seed, salt, 0x45C3])
    cross = _spines(router, src, dst)
    k = 0.0 if per_message else others_share(network)  # per message: the tier's mean carries the others
    factors, overs = [], []
    for _ in range(MESSAGE_DRAWS if per_message else 1):
        spine = rng.integers(router.num_spines, size=src.size)
        offsets, links = router.routes(src, dst, spine=spine)
        use = with_others(router, _link_time(topo, offsets, links, rate), k)
        if per_message:  # the mean throughput: full links serve what they can, the rest flows
            scale = _flow_scale(offsets, links, use)
            factors.append(rate.sum() / float((rate * scale).sum()))
            overs.append(rate[cross].sum() / float((rate * scale)[cross].sum()))  # the loss at the tier
        else:  # the job keeps its draw: the slowest flow sets the time, the busiest link is overloaded
            factors.append(float(use.max()))
            load = _link_time(topo, offsets, links, size)
            overs.append(float(with_others(router, offered_load(router, load), k).max()))
    return float(np.mean(factors)), float(np.mean(overs))


def demo() -> None:
    """Print the factor of a ring all-reduce's flows on 4 servers, two leaves, 1:1 to 4:1, per routing."""
    from dataclasses import replace

    from fabriclab.fabric.rail import gpu_cluster_topology

    for bisection in (1.0, 0.5, 0.25):
        topo = gpu_cluster_topology(num_servers=4, gpus_per_server=8, nics_per_server=8, nic="NDR",
                                    fabric="fat-tree", leaf_ports=16, bisection=bisection)
        ring = np.arange(32)
        src, dst = ring, np.roll(ring, -1)
        for routing in ("ecmp", "adaptive"):
            f = routing_factor(topo, src, dst, np.ones(32), replace(NetworkSpec(), routing=routing))
            print(f"bisection {bisection:g}: {routing} x{f:.2f}")


def draws(cluster, seeds: int) -> list:
    """The cluster once per draw of its hashes and of a scattered job's servers (`network.routing_seed` on):
    one where nothing is drawn."""
    from dataclasses import replace

    n = cluster.network
    if (n.routing != "ecmp" and n.placement != "scattered") or seeds <= 1:
        return [cluster]
    return [replace(cluster, network=replace(n, routing_seed=n.routing_seed + i)) for i in range(seeds)]


def median_p90(samples) -> tuple[np.ndarray, np.ndarray]:
    """Per column of (draws, values): the median and the 90th percentile."""
    samples = np.asarray(samples, dtype=np.float64)
    return np.median(samples, axis=0), np.percentile(samples, 90, axis=0)
