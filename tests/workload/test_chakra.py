"""Chakra execution traces: the protobuf wire format, exact round trips of rank graphs, the order ASTRA-sim
sees, traces fabriclab did not write, and clear errors for files that are not traces."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from fabriclab.workload import protowire as pw
from fabriclab.workload.chakra import (
    MIN_ALLGATHER_COMM_SIZE,
    astra_comm_size,
    comm_groups_path,
    graph_nodes,
    load_et,
    read_et,
    size_of_comm_size,
    write_et,
)
from fabriclab.workload.etfile import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    EtAttr,
    EtNode,
    encode_metadata,
    encode_node,
    read_et_file,
    write_et_file,
)
from fabriclab.workload.graph import COLLECTIVES, Op, RankGraph

# ---- wire format -----------------------------------------------------------------------------------


def test_varints_as_the_protobuf_encoding_guide_writes_them():
    # protobuf.dev/programming-guides/encoding: 150 in field 1 is 08 96 01; 300 is ac 02
    assert pw.field_varint(1, 150) == bytes.fromhex("089601")
    assert pw.encode_varint(300) == bytes.fromhex("ac02")
    assert pw.field_string(2, "testing") == bytes.fromhex("120774657374696e67")
    assert len(pw.encode_varint(-1)) == 10  # a negative int64: its 64-bit two's complement


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**31, 2**32 + 5, 2**63 - 1, 2**63, 2**64 - 1])
def test_varint_round_trip(value):
    data = pw.encode_varint(value)
    assert pw.decode_varint(data, 0) == (value, len(data))


def test_signed_and_zigzag():
    assert pw.to_signed(pw.decode_varint(pw.encode_varint(-5), 0)[0]) == -5
    assert pw.to_signed(pw.decode_varint(pw.encode_varint(-5), 0)[0], 32) == -5
    assert [pw.zigzag_decode(v) for v in range(5)] == [0, -1, 1, -2, 2]


def test_wire_errors_name_the_offset():
    with pytest.raises(pw.WireError, match="truncated varint at byte 1"):
        pw.decode_varint(b"\x00\xff\xff", 1)
    with pytest.raises(pw.WireError, match="longer than 10 bytes"):
        pw.decode_varint(b"\xff" * 11, 0)
    with pytest.raises(pw.WireError, match="wire type 3"):
        list(pw.iter_fields(bytes([1 << 3 | 3])))
    with pytest.raises(pw.WireError, match="runs past the end"):
        list(pw.iter_delimited(b"\x05ab"))


# ---- round trips -------------------------------------------------------------------------------------


def every_kind_graph(rank: int = 0, num_ranks: int = 2) -> RankGraph:
    """Every op kind, every collective, durations and FLOPs that microseconds and int64 cannot hold,
    default and explicit streams, and dependencies pointing forward in the list."""
    peer = 1 - rank
    ops = [Op(id=5, name="mm", kind="compute", flops=1.5e12 + 0.5, duration_s=1.2345678e-3),
           Op(id=9, name="huge", kind="compute", flops=3e20, duration_s=2.0, deps=(5,)),
           Op(id=1, name="odd compute", kind="compute", communicator="tp", size_bytes=7, group_size=3, peer=4,
              deps=(3,))]
    for i, collective in enumerate(c for c in COLLECTIVES if c not in ("send", "recv")):
        ops.append(Op(id=100 + i, name=f"c.{collective}", kind="comm", collective=collective, communicator="tp",
                      size_bytes=(i + 1) << 20, group_size=2, stream="comm" if i % 2 else "compute",
                      duration_s=0.0 if i % 3 else 1e-7 * (i + 1), deps=(5,)))
    ops += [Op(id=3, name="p2p.send", kind="comm", collective="send", communicator="pp", size_bytes=4096,
               group_size=2, peer=peer, stream="comm"),
            Op(id=4, name="p2p.recv", kind="comm", collective="recv", communicator="pp", size_bytes=4096,
               group_size=2, peer=peer, stream="comm", deps=(3,)),
            Op(id=7, name="send with flops", kind="comm", collective="send", communicator="", size_bytes=1,
               peer=peer, flops=3.0, group_size=0)]
    return RankGraph(rank=rank, num_ranks=num_ranks, ops=tuple(ops),
                     communicators={"tp": [0, 1], "pp": [0, 1]})


def test_round_trip_of_every_op_kind_and_collective(tmp_path):
    graph = every_kind_graph()
    paths = write_et([graph], tmp_path / "g")
    assert paths == [tmp_path / "g.0.et"]
    assert read_et(tmp_path / "g") == [graph]


def test_round_trip_of_several_ranks_and_of_graphs_without_groups(tmp_path):
    graphs = [every_kind_graph(r) for r in range(2)]
    write_et(graphs, tmp_path / "two")
    assert read_et(tmp_path / "two") == graphs
    bare = [RankGraph(rank=r, num_ranks=12, ops=every_kind_graph(r % 2).ops) for r in range(12)]
    write_et(bare, tmp_path / "bare")
    assert not comm_groups_path(tmp_path / "bare").exists()
    back = read_et(tmp_path / "bare")
    assert back == bare and [g.rank for g in back] == list(range(12))  # 10 and 11 after 9, not after 1
    empty = RankGraph(rank=0, num_ranks=1, ops=(), communicators={})
    write_et([empty], tmp_path / "empty")
    assert read_et(tmp_path / "empty.0.et") == [empty]


def test_a_large_graph_round_trips(tmp_path):
    ops = tuple(Op(id=i, name=f"op{i}", kind="comm" if i % 3 == 2 else "compute",
                   collective="allreduce" if i % 3 == 2 else "", communicator="dp" if i % 3 == 2 else "",
                   size_bytes=i * 1000 if i % 3 == 2 else 0, group_size=8 if i % 3 == 2 else 0,
                   stream="comm" if i % 3 == 2 else "compute", duration_s=i * 1.1e-6, flops=i * 1e9,
                   deps=(i - 1,) if i else ()) for i in range(5000))
    graph = RankGraph(rank=3, num_ranks=8, ops=ops, communicators={"dp": list(range(8))})
    write_et([graph], tmp_path / "big")
    assert read_et(tmp_path / "big") == [graph]


def test_the_mapping_uses_the_fields_astra_sim_reads(tmp_path):
    graph = every_kind_graph()
    et = read_et_file(write_et([graph], tmp_path / "g")[0])
    nodes = {n.id: n for n in et.nodes}
    mm = nodes[5]
    assert mm.type == COMP_NODE and mm.duration_micros == 1235 and mm.attr("num_ops") == 1_500_000_000_000
    assert mm.attr("is_cpu_op") is False and mm.attr("fabriclab_duration_s") == 1.2345678e-3
    assert nodes[9].attr("num_ops") == 2**63 - 1 and nodes[9].attr("fabriclab_flops") == 3e20
    kinds = {a.name: a.kind for a in nodes[100].attrs}
    assert nodes[100].type == COMM_COLL_NODE and nodes[100].attr("comm_type") == 0  # ALL_REDUCE
    assert kinds["comm_type"] == kinds["comm_size"] == "int64" and nodes[100].attr("comm_size") == 1 << 20
    by_name = {n.name: n for n in nodes.values()}
    # et_def.proto's CollectiveCommType; REDUCE (1) and BARRIER (9), which ASTRA-sim stops at, are written as
    # the REDUCE_SCATTER of the buffer and a 4-byte ALL_REDUCE
    schema = {"allreduce": 0, "reduce": 7, "allgather": 2, "broadcast": 5, "alltoall": 6, "reduce_scatter": 7,
              "barrier": 0}
    for collective, number in schema.items():
        assert by_name[f"c.{collective}"].attr("comm_type") == number
    assert by_name["c.barrier"].attr("comm_size") == 4 and by_name["c.barrier"].attr("fabriclab_collective") == "barrier"
    assert by_name["c.reduce"].attr("fabriclab_collective") == "reduce"
    assert not {n.attr("comm_type") for n in nodes.values()} & {1, 9}
    send, recv = nodes[3], nodes[4]
    assert send.type == COMM_SEND_NODE and (send.attr("comm_src"), send.attr("comm_dst")) == (0, 1)
    assert recv.type == COMM_RECV_NODE and (recv.attr("comm_src"), recv.attr("comm_dst")) == (1, 0)
    assert {a.name: a.kind for a in send.attrs}["comm_src"] == "int32" and nodes[7].attr("comm_dst") == 1
    groups = json.loads(comm_groups_path(tmp_path / "g").read_text())
    pg = nodes[100].attr("pg_name")
    assert groups[pg] == [0, 1] and int(pg) >= 1  # ASTRA-sim's group ids: integers, 0 is all ranks
    named = dict(zip(et.meta("fabriclab_communicators"), et.meta("fabriclab_pg_names")))
    assert named["tp"] == named["pp"] == pg  # one group of ranks, one id, whichever communicators name it


def test_stream_order_is_in_data_deps_so_the_order_survives_in_astra_sim():
    """ASTRA-sim's feeder waits on data_deps only: timing the nodes by data_deps alone gives fabriclab's
    critical path, and ctrl_deps names exactly the edges the streams added."""
    graph = every_kind_graph()
    nodes = graph_nodes(graph)
    by_id = {op.id: op for op in graph.ops}
    end: dict[int, float] = {}
    pending = list(nodes)
    while pending:
        node = next(n for n in pending if all(d in end for d in n.data_deps))
        end[node.id] = max((end[d] for d in node.data_deps), default=0.0) + by_id[node.id].duration_s
        pending.remove(node)
    assert max(end.values()) == pytest.approx(graph.critical_path_s(), rel=1e-12)
    for node in nodes:
        op = by_id[node.id]
        assert node.data_deps[:len(op.deps)] == op.deps
        assert node.data_deps[len(op.deps):] == node.ctrl_deps and len(node.ctrl_deps) <= 1


def test_send_and_receive_of_a_pair_share_a_tag(tmp_path):
    def rank(r):
        peer = 1 - r
        ops = [Op(id=i, name=f"p{i}", kind="comm", collective="send" if (i + r) % 2 == 0 else "recv", peer=peer,
                  size_bytes=8) for i in range(4)]
        return RankGraph(rank=r, num_ranks=2, ops=tuple(ops))

    files = [read_et_file(p) for p in write_et([rank(0), rank(1)], tmp_path / "p")]
    posted = {}
    for et in files:
        for n in et.nodes:
            key = (n.attr("comm_src"), n.attr("comm_dst"), n.attr("comm_tag"))
            posted.setdefault(key, []).append(n.type)
    assert all(sorted(types) == [COMM_SEND_NODE, COMM_RECV_NODE] for types in posted.values())
    assert {k[2] for k in posted} == {0, 1}


def test_writing_refuses_duplicate_ranks_and_negative_ids(tmp_path):
    with pytest.raises(ValueError, match="ranks \\[0\\] appear more than once"):
        write_et([every_kind_graph(), every_kind_graph()], tmp_path / "x")
    with pytest.raises(ValueError, match="negative"):
        write_et([RankGraph(rank=0, num_ranks=1, ops=(Op(id=-1, name="a", kind="compute"),))], tmp_path / "x")
    with pytest.raises(ValueError, match="no graphs"):
        write_et([], tmp_path / "x")


# ---- traces fabriclab did not write -----------------------------------------------------------------

# astra-sim examples/workload/microbenchmarks/all_reduce/4npus_1MB/all_reduce.0.et (commit 518bd51):
# GlobalMetadata(version="0.0.4"), then one COMM_COLL_NODE with is_cpu_op, comm_type and comm_size.
ASTRA_SIM_ALL_REDUCE_0 = ("070a05302e302e34481214616c6c5f7265647563655f346e7075735f314d421807520e0a0969735f"
                          "6370755f6f70d80100520d0a09636f6d6d5f747970654800520f0a09636f6d6d5f73697a6548808040")


def astra_sim_all_reduce(rank: int) -> EtNode:
    return EtNode(id=rank, name="all_reduce_4npus_1MB", type=COMM_COLL_NODE,
                  attrs=(EtAttr("is_cpu_op", "bool", False), EtAttr("comm_type", "int64", 0),
                         EtAttr("comm_size", "int64", 1 << 20)))


def test_the_encoder_writes_astra_sims_example_byte_for_byte(tmp_path):
    path = write_et_file(tmp_path / "all_reduce.0.et", [astra_sim_all_reduce(0)], version="0.0.4")
    assert path.read_bytes() == bytes.fromhex(ASTRA_SIM_ALL_REDUCE_0)
    assert pw.delimited(encode_metadata("0.0.4")) + pw.delimited(encode_node(astra_sim_all_reduce(0))) \
        == path.read_bytes()


def test_astra_sims_all_reduce_example_reads_as_one_world_all_reduce(tmp_path):
    for r in range(4):
        write_et_file(tmp_path / f"all_reduce.{r}.et", [astra_sim_all_reduce(r)], version="0.0.4")
    graphs = read_et(tmp_path / "all_reduce")
    assert [g.rank for g in graphs] == [0, 1, 2, 3]
    op = graphs[2].ops[0]
    assert (op.id, op.kind, op.collective, op.communicator, op.size_bytes, op.group_size, op.stream) == \
        (2, "comm", "allreduce", "world", 1 << 20, 4, "comm")


def foreign_trace(tmp_path: Path) -> Path:
    """Two ranks of a trace with only standard Chakra fields (as Chakra's generator and converter write)."""
    for rank in range(2):
        nodes = [
            EtNode(id=10, name="gemm", type=COMP_NODE, duration_micros=250,
                   attrs=(EtAttr("is_cpu_op", "bool", False), EtAttr("num_ops", "int64", 7_000_000))),
            EtNode(id=11, name="load", type=2, data_deps=(10,), duration_micros=99,
                   attrs=(EtAttr("tensor_size", "uint64", 1024),)),
            EtNode(id=12, name="ag", type=COMM_COLL_NODE, data_deps=(10, 10), ctrl_deps=(11,), duration_micros=40,
                   attrs=(EtAttr("comm_type", "int64", 2), EtAttr("comm_size", "int64", 4096),
                          EtAttr("pg_name", "string", "1"))),
            EtNode(id=13, name="rs", type=COMM_COLL_NODE, data_deps=(12,),
                   attrs=(EtAttr("comm_type", "int64", 8), EtAttr("comm_size", "uint64", 512))),
            EtNode(id=14, name="gather", type=COMM_COLL_NODE, data_deps=(12,),
                   attrs=(EtAttr("comm_type", "int64", 3), EtAttr("comm_size", "int64", 64))),
            EtNode(id=15, name="send" if rank == 0 else "recv", type=COMM_SEND_NODE if rank == 0 else COMM_RECV_NODE,
                   data_deps=(13,), attrs=(EtAttr("comm_src", "int32", 0), EtAttr("comm_dst", "int32", 1),
                                           EtAttr("comm_tag", "int32", 7), EtAttr("tensor_size", "uint64", 256))),
            EtNode(id=16, name="c10d::allreduce_", type=COMM_COLL_NODE, duration_micros=30,
                   attrs=(EtAttr("is_cpu_op", "bool", True),)),
            EtNode(id=17, name="pg", type=1),
        ]
        meta = [EtAttr("schema", "string", "1.0.1"), EtAttr("pid", "uint64", 4242)]
        write_et_file(tmp_path / f"foreign.{rank}.et", nodes, version="0.0.4", metadata=meta)
    return tmp_path / "foreign"


def test_a_foreign_trace_maps_the_standard_fields(tmp_path):
    got = load_et(foreign_trace(tmp_path))
    assert not got.fabriclab_written and len(got.graphs) == 2
    ops = {op.id: op for op in got.graphs[1].ops}
    assert (ops[10].kind, ops[10].duration_s, ops[10].flops, ops[10].stream) == ("compute", 250e-6, 7e6, "compute")
    assert (ops[11].kind, ops[11].duration_s, ops[11].deps) == ("compute", 0.0, (10,))  # MEM_LOAD: zero time
    assert (ops[12].collective, ops[12].communicator, ops[12].group_size, ops[12].deps) == \
        ("allgather", "1", 2, (10,))  # deduplicated data_deps, ctrl_deps ignored; group: all ranks (files)
    # ASTRA-sim's all-gather comm_size is one rank's part: the gathered buffer is 2 x 4096
    assert (ops[12].duration_s, ops[12].stream, ops[12].size_bytes) == (40e-6, "comm", 8192)
    assert (ops[13].collective, ops[13].communicator, ops[13].size_bytes) == ("reduce_scatter", "world", 512)
    assert ops[14].collective == "allgather"  # GATHER: approximated
    assert (ops[15].collective, ops[15].peer, ops[15].size_bytes) == ("recv", 0, 256)  # tensor_size fallback
    assert (ops[16].kind, ops[16].duration_s) == ("compute", 30e-6)  # the host side of a collective
    assert ops[17].kind == "compute" and ops[17].duration_s == 0.0
    assert got.graphs[0].ops[5].peer == 1 and got.graphs[0].communicators is None
    assert got.unknown_nodes == {"MEM_LOAD_NODE": 2, "METADATA_NODE": 2, "COMM_COLL_NODE (is_cpu_op)": 2}
    assert got.approximated == {"GATHER": 2}
    with pytest.warns(UserWarning, match="2 GATHER as the nearest collective"):
        read_et(tmp_path / "foreign")


def test_a_foreign_trace_takes_astra_sims_communicator_groups(tmp_path):
    got = load_et(foreign_trace(tmp_path), comm_groups={"1": [1], "2": [0, 1]})
    ag = next(op for op in got.graphs[1].ops if op.name == "ag")
    assert ag.group_size == 1 and got.graphs[1].communicators == {"1": [1], "2": [0, 1]}
    assert got.graphs[0].communicators == {"2": [0, 1]}
    with pytest.raises(ValueError, match="pg_name"):
        load_et(tmp_path / "foreign", comm_groups={"1": "0,1"})


def test_a_gzipped_trace_and_a_list_of_files(tmp_path):
    graph = every_kind_graph()
    path = write_et([graph], tmp_path / "g")[0]
    zipped = tmp_path / "z.0.et.gz"
    zipped.write_bytes(gzip.compress(path.read_bytes()))
    assert read_et(zipped) == [graph]
    assert read_et([path]) == [graph]


CHAKRA_SAMPLE = os.environ.get("FABRICLAB_CHAKRA_ET")


@pytest.mark.skipif(not CHAKRA_SAMPLE, reason="set FABRICLAB_CHAKRA_ET to Chakra's tests/data/chakra.0.et "
                                              "(in feeder_tests_trace.tar.gz of mlcommons/chakra) to read it")
def test_chakras_own_feeder_trace():
    """The facts Chakra's feeder tests (tests/feeder/tests.cpp) check on the same file."""
    nodes = {n.id: n for n in read_et_file(CHAKRA_SAMPLE).nodes}
    assert nodes[216].type == COMP_NODE and nodes[216].attr("is_cpu_op") and nodes[216].attr("rf_id") == 2
    assert nodes[432].type == COMM_COLL_NODE and nodes[432].attr("rf_id") == 110
    assert sorted(i for i, n in nodes.items() if 216 in n.data_deps)[:3] == [217, 430, 435]
    got = load_et(CHAKRA_SAMPLE)
    assert len(got.graphs[0].ops) == len(nodes) and got.unknown_nodes == {"COMM_COLL_NODE (is_cpu_op)": 14}


# ---- not a trace ------------------------------------------------------------------------------------


@pytest.mark.parametrize("content, fragment", [
    (b"", "empty file"),
    (b"\x1f\x8b\x08\x00broken", "a gzip file that does not decompress"),
    (b"\x80\x80", "truncated varint at byte 0"),
    (b"\x40abc", "runs past the end of the file"),
    (pw.delimited(b"") + pw.delimited(bytes([3 << 3 | 2, 1, 0])), "Node field 3 has wire type 2, the schema says 0 "
                                                                  "at byte 2"),
    (pw.delimited(b"") + pw.delimited(bytes([1 << 3 | 7])), "wire type 7"),
    (pw.delimited(bytes([1 << 3 | 0, 5])), "GlobalMetadata field 1 has wire type 0"),
])
def test_a_file_that_is_not_a_trace_names_the_file_and_offset(tmp_path, content, fragment):
    path = tmp_path / "bad.0.et"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="bad.0.et") as err:
        read_et(path)
    assert fragment in str(err.value)


def test_missing_files_say_what_to_give(tmp_path):
    with pytest.raises(ValueError, match="nothing.0.et exists"):
        read_et(tmp_path / "nothing")
    with pytest.raises(ValueError, match="no such trace file"):
        read_et([tmp_path / "a.0.et"])


def test_a_dependency_on_a_missing_node_names_the_file(tmp_path):
    write_et_file(tmp_path / "d.0.et", [EtNode(id=1, name="x", data_deps=(99,))])
    with pytest.raises(ValueError, match=r"d\.0\.et: rank 0: op 1 \(x\) depends on unknown ids \[99\]"):
        read_et(tmp_path / "d")


# ---- ASTRA-sim's conventions --------------------------------------------------------------------------

@pytest.mark.parametrize("collective, size, n, comm_size", [
    ("allreduce", 1 << 20, 8, 1 << 20),        # the whole buffer (Ring.cc: msg data_size / n, ends with data_size)
    ("reduce_scatter", 1 << 20, 8, 1 << 20),   # the input
    ("alltoall", 1 << 20, 8, 1 << 20),         # the send buffer
    ("allgather", 1 << 20, 8, 1 << 17),        # one rank's part: ASTRA-sim ends with comm_size x n
    ("allgather", 100, 8, MIN_ALLGATHER_COMM_SIZE),  # a chunk of 0 bytes would never end
    ("allgather", 0, 8, MIN_ALLGATHER_COMM_SIZE),
    ("allreduce", 0, 8, 1),                    # its network asserts messages of more than 0 bytes
])
def test_astra_sims_comm_size_of_an_nccl_tests_size(collective, size, n, comm_size):
    assert astra_comm_size(collective, size, n) == comm_size
    if comm_size == size or collective == "allgather" and size == comm_size * n:
        assert size_of_comm_size(collective, comm_size, n) == size


def collective_graph(rank: int, groups: dict, *ops: Op) -> RankGraph:
    return RankGraph(rank=rank, num_ranks=4, ops=ops, communicators=groups)


def test_an_all_gather_is_written_per_rank_and_read_back_exactly(tmp_path):
    ops = (Op(id=0, name="ag", kind="comm", collective="allgather", communicator="dp", size_bytes=4 << 20,
              group_size=4, stream="comm"),
           Op(id=1, name="odd", kind="comm", collective="allgather", communicator="dp", size_bytes=4099,
              group_size=4, stream="comm", deps=(0,)))
    graphs = [collective_graph(r, {"dp": [0, 1, 2, 3]}, *ops) for r in range(4)]
    et = read_et_file(write_et(graphs, tmp_path / "ag")[0])
    assert et.nodes[0].attr("comm_size") == 1 << 20 and et.nodes[0].attr("fabriclab_size_bytes") is None
    assert et.nodes[1].attr("comm_size") == 1024 and et.nodes[1].attr("fabriclab_size_bytes") == 4099
    assert read_et(tmp_path / "ag") == graphs


def test_every_rank_refers_to_one_group_by_one_id(tmp_path):
    """However a rank lists a group's ranks, and whichever communicators name it (dp and dpcp without CP)."""
    ar = Op(id=0, name="ar", kind="comm", collective="allreduce", communicator="dp", size_bytes=64, stream="comm")
    graphs = [collective_graph(0, {"dp": [0, 1], "dpcp": [0, 1], "pp": [0, 2]}, ar),
              collective_graph(1, {"dp": [1, 0], "dpcp": [0, 1], "pp": [1, 3]}, ar),
              collective_graph(2, {"dp": [2, 3], "pp": [2, 0]}, ar), collective_graph(3, {"dp": [3, 2]}, ar)]
    write_et(graphs, tmp_path / "g")
    groups = json.loads(comm_groups_path(tmp_path / "g").read_text())
    assert sorted(groups.values()) == [[0, 1], [0, 2], [1, 3], [2, 3]]  # sorted ranks, each once
    pg = [read_et_file(f"{tmp_path}/g.{r}.et").nodes[0].attr("pg_name") for r in range(4)]
    assert pg[0] == pg[1] and pg[2] == pg[3] and groups[pg[0]] == [0, 1] and groups[pg[2]] == [2, 3]
    assert read_et(tmp_path / "g") == graphs


def test_compute_nodes_carry_tensor_size_for_astra_sims_roofline(tmp_path):
    """Both num_ops and tensor_size on every node, at least 1: ASTRA-sim's roofline throws without either
    and divides 0 by 0 at num_ops 0; a copy then costs its bytes at the memory bandwidth."""
    ops = (Op(id=0, name="mm", kind="compute", flops=2e12, memory_bytes=3e9, duration_s=1e-3),
           Op(id=1, name="odd", kind="compute", flops=5.0, memory_bytes=10.25, deps=(0,)),
           Op(id=2, name="copy", kind="compute", memory_bytes=1e6, deps=(1,)),
           Op(id=3, name="marker", kind="compute", deps=(2,)))
    graph = RankGraph(rank=0, num_ranks=1, ops=ops)
    nodes = read_et_file(write_et([graph], tmp_path / "m")[0]).nodes
    assert (nodes[0].attr("tensor_size"), nodes[0].attr("num_ops")) == (3_000_000_000, 2_000_000_000_000)
    assert nodes[1].attr("tensor_size") == 10 and nodes[1].attr("fabriclab_memory_bytes") == 10.25
    assert (nodes[2].attr("tensor_size"), nodes[2].attr("num_ops"), nodes[2].attr("fabriclab_flops")) == \
        (1_000_000, 1, 0.0)
    assert (nodes[3].attr("tensor_size"), nodes[3].attr("num_ops")) == (1, 1)
    assert all(n.attr("is_cpu_op") is False for n in nodes)
    assert read_et(tmp_path / "m") == [graph]
    foreign = write_et_file(tmp_path / "f.0.et", [EtNode(id=1, attrs=(EtAttr("num_ops", "int64", 7),
                                                                      EtAttr("tensor_size", "uint64", 4096)))])
    assert read_et(foreign)[0].ops[0].memory_bytes == 4096.0


def test_a_file_of_format_revision_1_keeps_its_sizes(tmp_path):
    """fabriclab wrote nccl-tests' sizes as comm_size before ASTRA-sim's convention (revision 2)."""
    node = EtNode(id=0, name="ag", type=COMM_COLL_NODE, attrs=(
        EtAttr("comm_type", "int64", 2), EtAttr("comm_size", "int64", 4096), EtAttr("pg_name", "string", "1")))
    meta = [EtAttr("fabriclab_graph", "int64", 1), EtAttr("fabriclab_rank", "int64", 0),
            EtAttr("fabriclab_num_ranks", "int64", 4), EtAttr("fabriclab_communicators", "string_list", ["dp"]),
            EtAttr("fabriclab_pg_names", "string_list", ["1"]), EtAttr("fabriclab_group.dp", "int64_list", [0, 1])]
    write_et_file(tmp_path / "old.0.et", [node], metadata=meta)
    op = read_et(tmp_path / "old")[0].ops[0]
    assert (op.collective, op.communicator, op.group_size, op.size_bytes) == ("allgather", "dp", 2, 4096)


def test_a_foreign_trace_of_one_rank_takes_the_jobs_ranks(tmp_path):
    node = EtNode(id=0, name="ag", type=COMM_COLL_NODE,
                  attrs=(EtAttr("comm_type", "int64", 2), EtAttr("comm_size", "int64", 1 << 20)))
    write_et_file(tmp_path / "one.0.et", [node])
    op = read_et(tmp_path / "one", num_ranks=8)[0].ops[0]
    assert (op.group_size, op.size_bytes) == (8, 8 << 20)  # all ranks: the job's 8
    assert load_et(tmp_path / "one").graphs[0].ops[0].group_size == 1
    write_et_file(tmp_path / "one.5.et", [node])
    with pytest.raises(ValueError, match="4 ranks, but the trace has rank 5: give at least 6"):
        read_et(tmp_path / "one", num_ranks=4)
