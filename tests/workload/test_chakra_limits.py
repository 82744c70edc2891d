"""Untrusted Chakra traces (issue 38): every file read with bounds on its bytes, nodes and values, every
value typed (workload/etvalues.py); a bad file is one ValueError naming the file, node and field, never
another exception, a hang or gigabytes of memory. The CLI rows are in tests/cli/test_bad_inputs_sim.py."""

import gzip
import math
import random
import zlib

import pytest

from fabriclab.fabric.presets import cluster_preset
from fabriclab.whatif.graph_run import rank_time, run_graphs, sample_graphs
from fabriclab.workload import chakra, etfile
from fabriclab.workload import etvalues as ev
from fabriclab.workload.chakra import graph_nodes, load_et, write_et
from fabriclab.workload.etfile import COMP_NODE, EtAttr, EtNode, read_et_file, read_file_bytes, write_et_file
from fabriclab.workload.graph import Op


def test_a_gzip_is_decompressed_up_to_the_bound_only(tmp_path):
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    bomb = tmp_path / "bomb.et.gz"
    bomb.write_bytes(b"".join(squeeze.compress(bytes(1 << 20)) for _ in range(3)) + squeeze.flush())
    with pytest.raises(ValueError, match="bomb.et.gz: decompresses to more than 2 MiB"):
        read_file_bytes(bomb, limit=2 << 20)
    assert read_file_bytes(bomb, limit=3 << 20) == bytes(3 << 20)
    data = bytes(range(256)) * 40
    two = tmp_path / "two.gz"
    two.write_bytes(gzip.compress(data[:100]) + gzip.compress(data[100:]))  # members, as gzip.decompress reads
    assert read_file_bytes(two) == data
    cut = tmp_path / "cut.gz"
    cut.write_bytes(gzip.compress(data)[:-30])
    with pytest.raises(ValueError, match="cut.gz: a gzip file that does not decompress"):
        read_file_bytes(cut)
    big = tmp_path / "big.et"
    big.write_bytes(bytes(100))
    with pytest.raises(ValueError, match="big.et: 100 bytes; a trace file here holds at most 0 MiB"):
        read_file_bytes(big, limit=99)


def test_nodes_and_values_per_file_are_bounded(tmp_path, monkeypatch):
    nodes = [EtNode(id=i, name=f"n{i}", data_deps=tuple(range(i))) for i in range(12)]
    path = write_et_file(tmp_path / "t.0.et", nodes)
    assert len(read_et_file(path).nodes) == 12
    monkeypatch.setattr(etfile, "MAX_ET_NODES", 11)
    with pytest.raises(ValueError, match="t.0.et: more than 11 nodes"):
        read_et_file(path)
    monkeypatch.setattr(etfile, "MAX_ET_NODES", 100)
    monkeypatch.setattr(etfile, "MAX_ET_VALUES", 50)  # 66 dependencies in all
    with pytest.raises(ValueError, match="t.0.et: more than 50 dependencies, attributes and list values by node"):
        read_et_file(path)
    zeros = tmp_path / "zeros.et"
    zeros.write_bytes(bytes(1000))  # 1000 empty messages: nodes of nothing
    with pytest.raises(ValueError, match="more than 100 nodes"):
        read_et_file(zeros)


def test_a_trace_has_at_most_max_trace_ranks_and_nodes(tmp_path, monkeypatch):
    write_et_file(tmp_path / "f.1000000000.et", graph_nodes(sample_graphs(4)[1]))
    with pytest.raises(ValueError, match=r"rank 1,000,000,000 \(from the file name\) makes a trace of 1,000,000,001"):
        load_et(tmp_path / "f")
    write_et(sample_graphs(4), tmp_path / "demo")
    with pytest.raises(ValueError, match="ranks of the trace 200000: give a whole number from 1 to 131,072"):
        load_et(tmp_path / "demo", num_ranks=200_000)
    monkeypatch.setattr(chakra, "MAX_TRACE_NODES", 30)  # 13 a rank
    with pytest.raises(ValueError, match="demo.2.et: the trace passes 30 nodes over its files"):
        load_et(tmp_path / "demo")


@pytest.mark.parametrize("attrs, fragment", [
    ((EtAttr("fabriclab_duration_s", "double", math.nan),), "fabriclab_duration_s nan: give a finite number >= 0"),
    ((EtAttr("fabriclab_duration_s", "double", -1.0),), "fabriclab_duration_s -1.0"),
    ((EtAttr("fabriclab_duration_s", "double", math.inf),), "fabriclab_duration_s inf"),
    ((EtAttr("fabriclab_flops", "string", "many"),), "fabriclab_flops 'many'"),
    ((EtAttr("fabriclab_group_size", "int64", -2),), "fabriclab_group_size -2"),
    ((EtAttr("num_ops", "double", math.inf),), "num_ops inf"),
])
def test_a_bad_value_names_the_file_node_and_field(tmp_path, attrs, fragment):
    meta = [EtAttr("fabriclab_graph", "int64", 2), EtAttr("fabriclab_rank", "int64", 0),
            EtAttr("fabriclab_num_ranks", "int64", 2)]
    write_et_file(tmp_path / "v.0.et", [EtNode(id=3, name="mm", type=COMP_NODE, attrs=attrs)], metadata=meta)
    with pytest.raises(ValueError, match=f"v.0.et: node 3 \\('mm'\\): {fragment}"):
        load_et(tmp_path / "v")


def test_values_are_read_as_their_field_needs():
    assert ev.whole(4.0, "x") == 4 and ev.number(3, "x") == 3.0
    for bad in ("3", True, 2.5, math.inf, math.nan, -1, None, (1,)):
        with pytest.raises(ValueError, match="comm_size"):
            ev.whole(bad, "comm_size")
    with pytest.raises(ValueError, match="comm_dst 7: not a rank of this 4-rank trace"):
        ev.peer(7, "comm_dst", 4)
    with pytest.raises(ValueError, match="comm_dst is missing"):
        ev.peer(None, "comm_dst", 4)
    with pytest.raises(ValueError, match="a rank appears twice"):
        ev.ranks([0, 0], "group", 4)
    with pytest.raises(ValueError, match=r"op 0 \('x'\): duration_s nan"):
        Op(id=0, name="x", kind="compute", duration_s=math.nan)


def test_mutated_traces_give_a_result_or_a_value_error(tmp_path):
    """300 random byte mutations of a fabriclab trace and of a foreign one: each reads and costs, or is a
    ValueError; no other exception escapes to the CLI as a traceback."""
    graphs = sample_graphs(4)
    write_et(graphs, tmp_path / "t")
    write_et_file(tmp_path / "f.0.et", graph_nodes(graphs[1]))
    sources = [(tmp_path / name).read_bytes() for name in ("t.0.et", "t.1.et", "f.0.et")]
    rng, cluster, outcomes = random.Random(38), cluster_preset("dgx-h100"), {"ok": 0, "error": 0}
    path = tmp_path / "m.0.et"
    for _ in range(300):
        data = bytearray(rng.choice(sources))
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(data))
            if rng.random() < 0.6:
                data[at] = rng.randrange(256)
            else:
                data[at:at + rng.randint(1, 6)] = bytes(rng.randrange(256) for _ in range(rng.randint(0, 6)))
        path.write_bytes(bytes(data))
        try:
            got = load_et(path)
            for g in got.graphs:
                rank_time(g)
            run_graphs(got.graphs, cluster)
            outcomes["ok"] += 1
        except ValueError:
            outcomes["error"] += 1
    assert outcomes["ok"] and outcomes["error"], outcomes
