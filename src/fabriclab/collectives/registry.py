"""The catalogue of algorithms: names, parameters, and `build_schedule` from a spec string.

A spec is `name[:key=value[:key=value]]`, e.g. `ring`, `chain:chunks=8`,
`hierarchical:lower=chain:upper=binomial:group=4`. Aliases: `rhd` and `halving-doubling` for
`butterfly`, `rd` for `recursive-doubling`, `dbtree` for `double-binary-tree`, `ps` for
`parameter-server`, `hier` for `hierarchical`, and S-Caffe's and Zhang, Li, Tanimura and Nakada's names `cb`
(chain inside groups, binomial across), `cc` (chain, chain) and `layered` (butterfly, butterfly).

Try it: `fabriclab collectives list`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from fabriclab.collectives import direct, hierarchical, recursive, ring, trees
from fabriclab.collectives.schedule import (ALLGATHER, ALLREDUCE, BROADCAST, COLLECTIVES, REDUCE,
                                            REDUCE_SCATTER, Builder, Schedule)

COLLECTIVE_NAMES = COLLECTIVES


@dataclass(frozen=True, kw_only=True)
class Param:
    """One algorithm parameter as written in a spec (`key=value`)."""

    key: str
    """Name in the spec string."""
    default: Callable[[int], object]
    """Default value as a function of the number of ranks."""
    choices: tuple[str, ...] = ()
    """Allowed values of a text parameter; empty for a positive integer."""
    doc: str = ""
    """What it means."""
    at_most_ranks: bool = False
    """The value may not exceed the number of ranks (e.g. servers)."""

    def parse(self, text: str, num_ranks: int) -> object:
        if self.choices:
            if text not in self.choices:
                raise ValueError(f"{self.key}={text} is not valid: use one of {', '.join(self.choices)}")
            return text
        try:
            value = _relative(text, num_ranks) if text.startswith("P") else int(text)
        except ValueError:
            raise ValueError(f"{self.key}={text} is not a whole number (or P, P/k for the rank count "
                             f"divided by k)") from None
        if value < 1:
            raise ValueError(f"{self.key}={value} must be >= 1")
        if self.at_most_ranks and value > num_ranks:
            raise ValueError(f"servers={value} exceeds the {num_ranks} ranks: use 1..{num_ranks}")
        return value


def _relative(text: str, num_ranks: int) -> int:
    """`P` is the number of ranks and `P/k` that divided by k (at least 1): `ps:servers=P/8`."""
    if text == "P":
        return num_ranks
    head, slash, divisor = text.partition("/")
    if head != "P" or not slash or not divisor.isdigit() or int(divisor) < 1:
        raise ValueError(text)
    return max(1, num_ranks // int(divisor))


@dataclass(frozen=True, kw_only=True)
class Algorithm:
    """One named algorithm and the collectives it implements."""

    name: str
    doc: str
    builders: dict[str, Callable]
    """collective -> fn(builder, ranks, rng, **params); ranks start with the root."""
    params: tuple[Param, ...] = ()
    param_names: dict[str, str] = field(default_factory=dict)
    """spec key -> keyword argument of the builder functions (where they differ)."""
    docs: dict[str, str] = field(default_factory=dict)
    """collective -> what the algorithm does for it, where the builder's docstring does not say it."""


CHUNKS = Param(key="chunks", default=lambda p: 4, doc="pipeline chunks")
ONE_CHUNK = Param(key="chunks", default=lambda p: 1, doc="pipeline chunks")
LEVEL_DOC = "algorithm at that level"
ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm(name="ring", doc="Ring reduce-scatter + allgather (Patarasuk & Yuan 2009)",
              builders={ALLREDUCE: ring.ring_allreduce, REDUCE_SCATTER: ring.ring_reduce_scatter,
                        ALLGATHER: ring.ring_allgather, REDUCE: ring.ring_reduce,
                        BROADCAST: ring.ring_broadcast},
              docs={REDUCE_SCATTER: "Ring reduce-scatter: P-1 steps of S/P, rank i ends with block i reduced",
                    ALLGATHER: "Ring allgather: P-1 steps of S/P, each rank forwards the block it received"}),
    Algorithm(name="butterfly", doc="Recursive halving-doubling, Rabenseifner (MPICH)",
              builders={ALLREDUCE: recursive.butterfly_allreduce, REDUCE: recursive.butterfly_reduce,
                        BROADCAST: recursive.butterfly_broadcast},
              params=(Param(key="order", default=lambda p: "near", choices=("near", "far"),
                            doc="partner distance order (MPICH: near first)"),)),
    Algorithm(name="recursive", doc="Reduce-scatter by recursive halving / allgather by doubling",
              builders={REDUCE_SCATTER: recursive.halving_reduce_scatter,
                        ALLGATHER: recursive.doubling_allgather}),
    Algorithm(name="recursive-doubling", doc="log2(P) exchanges of the whole buffer (MPICH)",
              builders={ALLREDUCE: recursive.recursive_doubling_allreduce}),
    Algorithm(name="binomial", doc="Binomial tree reduce and/or broadcast (MPICH)",
              builders={ALLREDUCE: trees.binomial_allreduce, REDUCE: trees.binomial_reduce,
                        BROADCAST: trees.binomial_broadcast},
              params=(ONE_CHUNK,), param_names={"chunks": "num_chunks"}),
    Algorithm(name="chain", doc="Chunked chain, pipelined (S-Caffe CC, Awan et al.)",
              builders={ALLREDUCE: trees.chain_allreduce, REDUCE: trees.chain_reduce,
                        BROADCAST: trees.chain_broadcast},
              params=(CHUNKS,), param_names={"chunks": "num_chunks"}),
    Algorithm(name="double-binary-tree", doc="NCCL's double binary tree, pipelined",
              builders={ALLREDUCE: trees.double_binary_tree_allreduce},
              params=(CHUNKS,), param_names={"chunks": "num_chunks"}),
    Algorithm(name="direct", doc="One-step reduce-scatter to all, one-step allgather",
              builders={ALLREDUCE: direct.direct_allreduce, REDUCE_SCATTER: direct.direct_reduce_scatter,
                        ALLGATHER: direct.direct_allgather}),
    Algorithm(name="parameter-server", doc="Sharded parameter server, servers spread evenly",
              builders={ALLREDUCE: direct.parameter_server_allreduce},
              params=(Param(key="servers", default=lambda p: max(1, p // 8), at_most_ranks=True,
                            doc="number of servers (Zhang, Li, Tanimura, Nakada: P/8)"),),
              param_names={"servers": "num_servers"}),
    Algorithm(name="hierarchical", doc="Two levels: groups, then leaders (S-Caffe CB/CC)",
              builders={ALLREDUCE: hierarchical.hierarchical_allreduce,
                        REDUCE: hierarchical.hierarchical_reduce,
                        BROADCAST: hierarchical.hierarchical_broadcast},
              params=(Param(key="lower", default=lambda p: "chain", choices=hierarchical.LEVELS,
                            doc=LEVEL_DOC),
                      Param(key="upper", default=lambda p: "binomial", choices=hierarchical.LEVELS,
                            doc=LEVEL_DOC),
                      Param(key="group", default=lambda p: 4, doc="ranks per group (chain size)"),
                      CHUNKS),
              param_names={"group": "group_size", "chunks": "num_chunks"}),
)}

ALIASES = {
    "rhd": "butterfly", "halving-doubling": "butterfly", "rd": "recursive-doubling",
    "dbtree": "double-binary-tree", "ps": "parameter-server", "hier": "hierarchical",
    "cb": "hierarchical:lower=chain:upper=binomial", "cc": "hierarchical:lower=chain:upper=chain",
    "layered": "hierarchical:lower=butterfly:upper=butterfly",
}


def _check_collective(collective: str) -> None:
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}: use one of {', '.join(COLLECTIVES)}")


def algorithm_names(collective: str) -> list[str]:
    _check_collective(collective)
    return [a.name for a in ALGORITHMS.values() if collective in a.builders]


def parse_spec(collective: str, spec: str, num_ranks: int) -> tuple[Algorithm, dict[str, object]]:
    """Resolve aliases and parameters of a spec; every parameter gets its value or default."""
    _check_collective(collective)
    name, _, rest = spec.strip().partition(":")
    if name in ALIASES:
        alias_name, _, alias_rest = ALIASES[name].partition(":")
        name, rest = alias_name, ":".join(x for x in (alias_rest, rest) if x)
    algo = ALGORITHMS.get(name)
    if algo is None or collective not in algo.builders:
        known = ", ".join(algorithm_names(collective))
        raise ValueError(f"unknown {collective} algorithm {spec!r}: use one of {known} (or native)")
    params = {p.key: p.default(num_ranks) for p in algo.params}
    by_key = {p.key: p for p in algo.params}
    for item in filter(None, rest.split(":")):
        key, eq, value = item.partition("=")
        if not eq or key not in by_key:
            accepted = ", ".join(f"{k}=" for k in by_key) or "no parameters"
            raise ValueError(f"bad parameter {item!r} in {spec!r}: {algo.name} takes {accepted}")
        params[key] = by_key[key].parse(value, num_ranks)
    return algo, params


def canonical_spec(algo: Algorithm, params: dict[str, object]) -> str:
    return ":".join([algo.name] + [f"{p.key}={params[p.key]}" for p in algo.params])


def build_schedule(collective: str, algo: str, num_ranks: int, count: int, root: int = 0) -> Schedule:
    """Build the schedule of `algo` (a spec string) for `collective` on `num_ranks` ranks."""
    if num_ranks < 1:
        raise ValueError(f"number of ranks must be >= 1, got {num_ranks}")
    if count < 0:
        raise ValueError(f"element count must be >= 0, got {count}")
    if collective in (REDUCE, BROADCAST) and not 0 <= root < num_ranks:
        raise ValueError(f"root {root} is out of range for {num_ranks} ranks: use 0..{num_ranks - 1}")
    spec, params = parse_spec(collective, algo, num_ranks)
    rooted = collective in (REDUCE, BROADCAST)
    # Rooted collectives see the ranks relative to the root; the others keep the block layout.
    ranks = [(root + i) % num_ranks for i in range(num_ranks)] if rooted else list(range(num_ranks))
    b = Builder(num_ranks, count)
    kwargs = {spec.param_names.get(k, k): v for k, v in params.items()}
    spec.builders[collective](b, ranks, (0, count), **kwargs)
    return b.build(collective, canonical_spec(spec, params), root if rooted else 0)


def verify_specs(collective: str, num_ranks: int) -> list[str]:
    """Every parameterisation worth checking at `num_ranks`: chunk counts, orders, servers, levels."""
    specs: list[str] = []
    for name in algorithm_names(collective):
        if name in ("chain", "binomial", "double-binary-tree"):
            specs += [f"{name}:chunks={n}" for n in (1, 3, 8)]
        elif name == "butterfly" and collective == ALLREDUCE:
            specs += ["butterfly:order=near", "butterfly:order=far"]
        elif name == "parameter-server":
            specs += [f"{name}:servers={k}" for k in ("1", "P/8", "P/3", "P")]
        elif name == "hierarchical":
            levels = hierarchical.LEVELS
            specs += [f"{name}:lower={lo}:upper={up}:group={g}:chunks=2"
                      for lo in levels for up in levels for g in (2, 3)]
            specs += [f"{name}:lower=chain:upper=binomial:group={g}:chunks=3" for g in (1, 8, "P")]
        else:
            specs.append(name)
    return list(dict.fromkeys(specs))


def describe(collective: str) -> list[tuple[str, str, str]]:
    """(name, parameters with their defaults, one-line doc) for every algorithm of a collective."""
    rows = []
    for name in algorithm_names(collective):
        algo = ALGORITHMS[name]
        params = " ".join(f"{p.key}={'|'.join(p.choices) if p.choices else p.doc}"
                          f" (default {p.default(8) if p.key != 'servers' else 'P/8'})"
                          for p in algo.params)
        rows.append((name, params, algo.doc if collective == ALLREDUCE else _builder_doc(algo, collective)))
    return rows


def _builder_doc(algo: Algorithm, collective: str) -> str:
    """What the algorithm does for this collective: the first line of its builder's docstring (a ring
    broadcast scatters and allgathers, it does not reduce-scatter), with `ranks[0]` said as the root."""
    if collective in algo.docs:
        return algo.docs[collective]
    doc = (algo.builders[collective].__doc__ or "").strip().splitlines()
    line = doc[0].rstrip(".") if doc else algo.doc
    return line.replace("`ranks[0]`", "the root").replace("`ranks[i]`", "rank i")

