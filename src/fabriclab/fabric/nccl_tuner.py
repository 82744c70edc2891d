"""An NCCL tuner plugin's rules: which algorithm, protocol and channel count it sets per communicator and size.

Clouds ship NCCL with a tuner plugin (`NCCL_TUNER_PLUGIN`) that overrides NCCL's own choice by rules:
Google's `libnccl-tuner.so` reads a `tuner_config.textproto` of `communicator_configs` (a range of nodes
and of ranks per node), each with `coll_configs` (one collective, or `COLL_DEFAULT` for the others) of
`msg_size_tuning_rules` (a range of the per-rank message size: NCCL's bytes of the call over its ranks)
that name an algorithm, a protocol
and a channel count. A cluster's `library.tuner` holds them flat, one `TunerRule` each, in the file's order.

The first communicator range holding the job decides; in it the collective's own rules, else the default
ones; the first rule whose size range holds the message. The pair it names replaces NCCL's choice where
NCCL could run it (else NCCL's own choice stands), on its channel count (at most the library's).

`read_textproto(text)` turns such a file into rules: `fabriclab calibrate nccl-tests --nccl-tuner FILE`.

Try it: `fabriclab simulate collective --cluster examples/nccl-corpus/gke-a4-b200-1gpu/cluster.json --gpus 2
--collective allgather`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabriclab.fabric.nccl_env import ALGORITHM_NAMES, PROTOCOL_NAMES
from fabriclab.textfile import read_text

_COLL_TYPES = {"COLL_ALL_REDUCE": "allreduce", "COLL_ALL_GATHER": "allgather",
               "COLL_REDUCE_SCATTER": "reduce_scatter", "COLL_BROADCAST": "broadcast", "COLL_REDUCE": "reduce",
               "COLL_DEFAULT": "default"}
COLLECTIVES = tuple(_COLL_TYPES.values())


@dataclass(frozen=True, kw_only=True)
class TunerRule:
    """One rule of a tuner plugin: ranges are [min, max), max 0 meaning no upper end."""

    nodes: tuple[int, int]
    """Nodes (servers) of the communicator, [min, max)."""
    ranks_per_node: tuple[int, int]
    """Ranks per node, [min, max)."""
    collective: str
    """allreduce, allgather, reduce_scatter, broadcast, reduce, or default (the others)."""
    per_rank_bytes: tuple[int, int]
    """Per-rank message size in bytes (the call's bytes over its ranks), [min, max)."""
    algorithm: str
    """fabriclab's algorithm name (ring, tree, nvls, nvls_tree, collnet_direct, collnet_chain, pat)."""
    protocol: str
    """LL, LL128 or Simple."""
    channels: int = 0
    """Channels it runs on; 0: NCCL's own count."""
    communicator: int = 0
    """Which communicator block of the file it belongs to (two blocks with the same ranges stay apart)."""

    def __post_init__(self) -> None:
        for name in ("nodes", "ranks_per_node", "per_rank_bytes"):
            value = getattr(self, name)
            if (not isinstance(value, (tuple, list)) or len(value) != 2
                    or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
                    or (value[1] and value[1] <= value[0])):
                raise ValueError(f"tuner rule {name} {value!r}: give [min, max) as two whole numbers, max 0 for "
                                 f"no upper end")
            object.__setattr__(self, name, (int(value[0]), int(value[1])))
        if self.collective not in COLLECTIVES:
            raise ValueError(f"tuner rule collective {self.collective!r}: give one of {', '.join(COLLECTIVES)}")
        if self.algorithm not in ALGORITHM_NAMES.values():
            raise ValueError(f"tuner rule algorithm {self.algorithm!r}: give one of "
                             f"{', '.join(ALGORITHM_NAMES.values())}")
        if self.protocol not in PROTOCOL_NAMES.values():
            raise ValueError(f"tuner rule protocol {self.protocol!r}: give one of {', '.join(PROTOCOL_NAMES.values())}")
        for name in ("channels", "communicator"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"tuner rule {name} {value!r}: give a whole number (channels: 0 for NCCL's own)")


def _within(value: int, span: tuple[int, int]) -> bool:
    return value >= span[0] and (span[1] == 0 or value < span[1])


def per_rank_bytes(size_bytes: int, num_ranks: int) -> int:
    """The per-rank message size a tuner sees for an nccl-tests size: NCCL's nBytes (the whole buffer: for
    allgather and reduce-scatter all ranks' shares) over the ranks. (Read as the whole buffer instead, the
    16-GPU B200 all_gather of the corpus, gke-a4-b200-roce, goes from 22 % to 1,425 % median at 1-16 MiB.)"""
    return size_bytes // max(1, num_ranks)


def tuner_rule(rules, nodes: int, ranks_per_node: int, collective: str, per_rank: int) -> TunerRule | None:
    """The rule that decides (module doc), None where the tuner leaves NCCL's choice."""
    communicator = next((r.communicator for r in rules
                         if _within(nodes, r.nodes) and _within(ranks_per_node, r.ranks_per_node)), None)
    if communicator is None:
        return None
    mine = [r for r in rules if r.communicator == communicator]
    own = [r for r in mine if r.collective == collective]
    for r in own or [r for r in mine if r.collective == "default"]:
        if _within(per_rank, r.per_rank_bytes):
            return r
    return None


def rules_from_json(value: object, where: str) -> tuple[TunerRule, ...]:
    """`library.tuner` of a cluster file: a list of rule objects."""
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{where}: library.tuner is {value!r}: give a list of rules "  # noqa: TRY004
                         f"(fabriclab calibrate nccl-tests --nccl-tuner FILE writes them)")
    out = []
    known = set(TunerRule.__dataclass_fields__)
    for i, item in enumerate(value):
        if isinstance(item, TunerRule):
            out.append(item)
            continue
        if not isinstance(item, dict) or set(item) - known:
            raise ValueError(f"{where}: library.tuner[{i}] {item!r}: give an object with {', '.join(sorted(known))}")
        try:
            out.append(TunerRule(**{k: tuple(v) if isinstance(v, list) else v for k, v in item.items()}))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: library.tuner[{i}]: {exc}") from None
    return tuple(out)


_TOKEN = re.compile(r'#[^\n]*|"[^"]*"|[{}:]|[^\s{}:#]+')


def read_textproto(text: str, where: str = "tuner config") -> tuple[TunerRule, ...]:
    """Rules from a Google-style `tuner_config.textproto` (communicator_configs / coll_configs /
    msg_size_tuning_rules / coll_tuning_spec); a ValueError naming what is not understood."""
    tokens = [t for t in _TOKEN.findall(text) if not t.startswith("#")]
    pos = 0

    def block() -> dict:
        nonlocal pos
        out: dict = {}
        while pos < len(tokens) and tokens[pos] != "}":
            key = tokens[pos]
            pos += 1
            if pos < len(tokens) and tokens[pos] == ":":
                pos += 1
            if pos >= len(tokens):
                raise ValueError(f"{where}: {key} has no value")
            if tokens[pos] == "{":
                pos += 1
                value = block()
                if pos >= len(tokens) or tokens[pos] != "}":
                    raise ValueError(f"{where}: {key} {{ is not closed")
                pos += 1
            else:
                value = tokens[pos].strip('"')
                pos += 1
            out.setdefault(key, []).append(value)
        return out

    top = block()
    if pos != len(tokens):
        raise ValueError(f"{where}: an unmatched }} at token {pos}")

    def blocks(d: dict, key: str) -> list[dict]:
        found = d.get(key, [])
        if not all(isinstance(b, dict) for b in found):
            raise ValueError(f"{where}: {key} is a value where a {{ ... }} block belongs")
        return found

    def word(d: dict, key: str, default: str) -> str:
        value = (d.get(key) or [default])[0]
        if not isinstance(value, str):
            raise ValueError(f"{where}: {key} is a {{ ... }} block where a value belongs")
        return value

    def whole(d: dict, key: str, default: str, field: str) -> int:
        text = word(d, key, default)
        if not text.isdigit():
            raise ValueError(f"{where}: {field}.{key} {text!r} is not a whole number")
        return int(text)

    def span(d: dict, key: str) -> tuple[int, int]:
        r = (blocks(d, key) or [{}])[0]
        return whole(r, "min", "0", key), whole(r, "max", "0", key)

    rules = []
    for index, comm in enumerate(blocks(top, "communicator_configs")):
        nodes, per_node = span(comm, "node_range"), span(comm, "rank_per_node_range")
        for coll in blocks(comm, "coll_configs"):
            kind = word(coll, "coll_type", "COLL_DEFAULT")
            if kind not in _COLL_TYPES:
                raise ValueError(f"{where}: coll_type {kind}: fabriclab reads {', '.join(_COLL_TYPES)}")
            for rule in blocks(coll, "msg_size_tuning_rules"):
                spec = (blocks(rule, "coll_tuning_spec") or [{}])[0]
                algo = word(spec, "algorithm", "").removeprefix("ALGO_").replace("_", "").lower()
                proto = word(spec, "protocol", "").removeprefix("PROTO_").lower()
                if algo not in ALGORITHM_NAMES or proto not in PROTOCOL_NAMES:
                    raise ValueError(f"{where}: coll_tuning_spec {spec!r}: an ALGO_ and a PROTO_ NCCL knows")
                sizes, channels = span(rule, "per_rank_message_size"), whole(spec, "num_channel", "0",
                                                                              "coll_tuning_spec")
                try:
                    rules.append(TunerRule(nodes=nodes, ranks_per_node=per_node, collective=_COLL_TYPES[kind],
                                           per_rank_bytes=sizes, algorithm=ALGORITHM_NAMES[algo],
                                           protocol=PROTOCOL_NAMES[proto], channels=channels, communicator=index))
                except ValueError as exc:
                    raise ValueError(f"{where}: communicator_configs[{index}]: {exc}") from None
    if not rules:
        raise ValueError(f"{where}: no communicator_configs with msg_size_tuning_rules")
    return tuple(rules)


def read_tuner_file(path) -> tuple[TunerRule, ...]:
    """`read_textproto` of a file; a ValueError naming it when it cannot be read."""
    try:
        text = read_text(path, "--nccl-tuner")
    except OSError as exc:
        raise ValueError(f"--nccl-tuner {path}: cannot read it ({exc.strerror or exc}); give the "
                         f"tuner_config.textproto the runs used") from None
    return read_textproto(text, f"--nccl-tuner {path}")
