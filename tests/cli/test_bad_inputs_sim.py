"""Bad input to the simulation and compare commands: one line `error: ...`, the right exit code, no
traceback, no hang, and nothing too large started (each case runs `python -m fabriclab` with a time
limit far below what a hang or an out-of-memory run would take). The cases run a few at a time in one fixture
(`outcomes`), each with a results store of its own: a process is mostly Python starting and importing.

`{tmp}` in an argument is the test's temporary folder, where `_files` has put the inputs named below.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fabriclab.record import make_record

TIME_LIMIT_S = 30
WORKERS = 3  # cases at a time
SIM = ("simulate", "collective")
STAR4 = (*SIM, "--topology", "star", "--hosts", "4", "--size", "1MB")

# (arguments, fragment of the error line, exit code)
CASES = [
    # the results store and plan's GPU counts: checked before any work
    (("whatif", "--store", "/proc/x.db"), "--store /proc/x.db", 2),
    (("whatif", "--store", "{tmp}"), "that is a directory", 2),
    (("plan", "--gpus", "100000000", "--fabrics", "25gbe"), "more than the limit of 16384", 2),
    # simulate collective: numbers, limits, names
    ((*STAR4, "--gamma", "-1"), "--gamma -1", 2),
    ((*STAR4, "--gamma", "nan"), "--gamma nan", 2),
    ((*STAR4, "--gamma", "inf"), "--gamma inf", 2),
    ((*SIM, "--hosts", "100000000", "--hosts-per-leaf", "64"), "at most 1048576 endpoints", 2),
    ((*SIM, "--topology", "star", "--hosts", "4", "--size", "0"), "at least one element", 2),
    ((*SIM, "--topology", "star", "--hosts", "4", "--size", "1MB", "--itemsize", "3"),
     "not a whole number of 3-byte elements", 2),
    ((*SIM, "--topology", "star", "--hosts", "4", "--size", "2PB"), "at most 1PB", 2),
    ((*SIM, "--topology", "torus", "--hosts", "16", "--dims", "2x3"), "disagree", 2),
    ((*SIM, "--topology", "torus", "--dims", "0x4"), "--dims", 2),
    ((*SIM, "--topology", "torx"), "--topology 'torx'", 2),
    ((*SIM, "--topology", "flattened-butterfly", "--hosts", "10"), "k^2 or k^3", 2),
    ((*SIM, "--topology", "star", "--dims", "4x4"), "--dims is for torus", 2),
    ((*SIM, "--hosts", "abc"), "--hosts 'abc'", 2),
    ((*SIM, "--hosts-per-leaf", "0"), "--hosts-per-leaf 0", 2),
    ((*SIM, "--levels", "4"), "--levels 4", 2),
    ((*SIM, "--gpus-per-server", "1000"), "--gpus-per-server 1000", 2),
    ((*SIM, "--bisection", "0"), "--bisection", 2),
    ((*SIM, "--bisection", "3/2"), "--bisection", 2),
    ((*SIM, "--link", "25XbE"), "--link '25XbE'", 2),
    ((*SIM, "--latency", "nan"), "invalid time 'nan'", 2),
    ((*SIM, "--latency", "-1us"), "invalid time '-1us'", 2),
    # link rates and latencies outside a physical range (1 kbit/s .. 1 Pbit/s, 0 .. 10 s)
    ((*STAR4, "--link", "1e-300Gbps"), "--link '1e-300Gbps' is 1e-291 bit/s: give a rate from 1 kbit/s", 2),
    ((*STAR4, "--link", "1e300Gbps"), "--link '1e300Gbps' is inf bit/s: give a rate from 1 kbit/s", 2),
    ((*STAR4, "--link", "2Pbps"), "to 1 Pbit/s", 2),
    ((*STAR4, "--link", "999bps"), "--link '999bps' is 999 bit/s", 2),
    ((*STAR4, "--latency", "11s"), "--latency '11s' is 11 s: give a latency from 0 to 10 s", 2),
    ((*STAR4, "--latency", "1e400s"), "--latency '1e400s' is inf s", 2),
    ((*STAR4, "--link", "4GB/s@20s"), "--link '4GB/s@20s' is 20 s: give a latency from 0 to 10 s", 2),
    ((*SIM, "--ranks", "0"), "--ranks 0", 2),
    ((*SIM, "--ranks", "100"), "has 8 endpoints", 2),
    ((*STAR4, "--algo", "nosuch"), "unknown allreduce algorithm 'nosuch'", 2),
    ((*STAR4, "--collective", "alltoall"), "unknown collective 'alltoall'", 2),
    ((*STAR4, "--routing", "ospf"), "only fat-tree and leaf-spine", 2),
    ((*SIM, "--routing", "ospf"), "routing 'ospf'", 2),
    ((*STAR4, "--engine", "fast"), "engine 'fast'", 2),
    ((*STAR4, "--top", "-1"), "--top '-1'", 2),
    ((*STAR4, "--format", "nccl-tests"), "add --cluster FILE", 2),
    ((*STAR4, "--format", "xml"), "--format 'xml'", 2),
    ((*SIM, "--cluster", "{tmp}/missing.json"), "no such file", 2),
    ((*SIM, "--topology", "star", "--hosts", "65536", "--algo", "direct"), "messages", 2),
    ((*SIM, "--topology", "star", "--hosts", "65536", "--algo", "ps:servers=P/2"), "at once", 2),
    ((*STAR4, "--json", "/proc/x.json"), "--json /proc/x.json", 2),
    ((*STAR4, "--json", "{tmp}"), "that is a directory", 2),
    ((*STAR4, "--ops-csv", "/proc/x.csv"), "--ops-csv /proc/x.csv", 2),
    ((*STAR4, "--ops-csv", "{tmp}/ops.csv", "--engine", "levels"), "drop --engine levels", 2),
    # simulate sweep: outputs and the resume CSV
    (("simulate", "sweep", "--out", "{tmp}/a_file"), "that is a file", 2),
    (("simulate", "sweep", "--preset", "nosuch", "--out", "{tmp}/s"), "unknown preset 'nosuch'", 2),
    (("simulate", "sweep", "--hosts", "7", "--out", "{tmp}/s"), "not in the preset", 2),
    (("simulate", "sweep", "--hosts", "128", "--methods", "ring", "--out", "{tmp}/junk"),
     "junk/fatness.csv: not a fatness sweep CSV", 2),
    (("simulate", "sweep", "--hosts", "128", "--methods", "ring", "--out", "{tmp}/badheader"),
     "is not a fatness sweep CSV's", 2),
    # whatif
    (("whatif", "--compression", "nan"), "--compression nan", 2),
    (("whatif", "--compression", "inf"), "--compression inf", 2),
    (("whatif", "--compression", "0"), "--compression 0", 2),
    (("whatif", "--gamma", "-1"), "--gamma -1", 2),
    (("whatif", "--cost", "simulated", "--gamma", "-1"), "--gamma -1", 2),
    (("whatif", "--cost", "simulated", "--gamma", "nan"), "--gamma nan", 2),
    (("whatif", "--cost", "simulated", "--hosts-per-leaf", "0"), "--hosts-per-leaf 0", 2),
    (("whatif", "--cost", "simulated", "--workers", "16", "--hosts-per-leaf", "16"), "only one leaf", 2),
    (("whatif", "--cost", "simulated", "--topology", "torus", "--workers", "7", "--routing", "ecmp"),
     "only fat-tree and leaf-spine", 2),
    (("whatif", "--profile", "{tmp}/nan.json"), "nan.json", 2),
    (("whatif", "--profile", "{tmp}/nan.bk.log", "--iteration-time", "0.1"),
     "nan.bk.log:5: wait_us must be a finite number", 2),
    (("whatif", "--profile", "{tmp}/junk.bin"), "junk.bin", 2),
    (("whatif", "--bandwidth", "1e400Gbps"), "finite bandwidth", 2),
    (("whatif", "--bandwidth", "1e-300Gbps"), "--bandwidth '1e-300Gbps' is 1e-291 bit/s: give a rate", 2),
    (("whatif", "--bandwidth", "1,10,1e9Gbps"), "--bandwidth '1e9Gbps' is 1e+18 bit/s", 2),
    (("whatif", "--latency", "1e300s"), "--latency '1e300s' is 1e+300 s: give a latency from 0 to 10 s", 2),
    (("whatif", "--workers", "0"), "values start at 1", 2),
    (("whatif", "--workers", "99999999"), "at most 1048576 workers", 2),
    (("whatif", "--fusion", "greedy"), "unknown fusion policy 'greedy'", 2),
    (("whatif", "--cost", "nosuch"), "--cost 'nosuch'", 2),
    (("whatif", "--latency", "nan"), "invalid time 'nan'", 2),
    (("whatif", "--add-cost", "{tmp}/missing.txt"), "--add-cost", 2),
    (("whatif", "--csv", "/proc/x.csv"), "--csv /proc/x.csv", 2),
    (("whatif", "--plots", "{tmp}/a_file"), "that is a file", 2),
    (("whatif", "reproduce", "--out", "{tmp}/a_file"), "that is a file", 2),
    # validate
    (("validate", "emulated", "--from-record", "{tmp}/missing.json"), "no such file", 2),
    (("validate", "emulated", "--from-record", "{tmp}/other_kind.json"), "not a 'validate' record", 2),
    (("validate", "emulated", "--from-record", "{tmp}/junk.bin"), "junk.bin is not UTF-8 text", 2),
    (("validate", "emulated", "--from-record", "{tmp}/empty_runs.json"), "no runs with rows", 2),
    (("validate", "emulated", "--from-record", "{tmp}/other_kind.json", "--out", "{tmp}/a_file"),
     "that is a file", 2),
    (("validate", "emulated", "--hosts", "0"), "--hosts 0", 2),
    # emu (all refused before anything is built)
    (("emu", "up", "--topology", "star", "--routing", "ospf"), "only fat-tree and leaf-spine", 2),
    (("emu", "up", "--routing", "ospf"), "routing 'ospf'", 2),
    (("emu", "up", "--hosts", "100000000"), "at most 512 namespaces", 2),
    (("emu", "up", "--topology", "torus", "--dims", "2x3", "--hosts", "5"), "disagree", 2),
    (("emu", "up", "--dilation", "0.5"), "D >= 1", 2),
    (("emu", "up", "--dilation", "nan"), "--dilation nan", 2),
    (("emu", "up", "--link", "1e-300Gbps"), "give a rate from 1 kbit/s to 1 Pbit/s", 2),
    (("emu", "up", "--link", "1Gbps", "--dilation", "1000000"), "= 1 kbit/s: tc's tbf shapes 3.81 kbit/s", 2),
    (("emu", "up", "--link", "1Pbps"), "to 3.44 Tbit/s", 2),
    (("emu", "run", "--port", "70000", "--", "true"), "--port 70000", 2),
    (("emu", "run", "--timeout", "nan", "--", "true"), "--timeout nan", 2),
    (("emu", "status", "--count", "0"), "--count 0", 2),
    # models, bench
    (("models", "nosuch"), "unknown model 'nosuch'", 2),
    (("models", "--format", "xml"), "--format 'xml'", 2),
    (("bench", "cli", "--runs", "0"), "--runs 0", 2),
    (("bench", "sim", "--cases", "nosuch"), "unknown cases", 2),
    (("bench", "train", "--np", "0"), "--np 0", 2),
    (("bench", "fabrics", "--out", "{tmp}/a_file"), "that is a file", 2),
    # found by a bad-input probe of the one-house redesign
    (("calibrate", "nccl-tests", "{logs}/nccl_2.log", "--gpus-per-server", "0", "--out", "{tmp}/c.json"),
     "--gpus-per-server 0: give a whole number from 1 to 64", 2),
    ((*SIM, "--cluster", "dgx-a100", "--gpus", "1048576"), "at most 131072 GPUs", 2),
    ((*SIM, "--cluster", "dgx-a100", "--gpus", "30", "--servers", "4"), "the same number of GPUs on every server", 2),
    ((*SIM, "--cluster", "dgx-a100", "--gpus", "16", "--servers", "0"), "--servers", 2),
    ((*STAR4, "--servers", "2"), "go with --cluster", 2),
    (("whatif", "--cluster", "dgx-a100", "--workers", "1048576"), "--workers 1048576: a cluster prediction takes "
                                                                  "at most 131072", 2),
    (("calibrate", "nccl-tests", "{logs}/nccl_8.log", "{tmp}/h100.log", "--out", "{tmp}/c.json"),
     "the logs come from different GPUs", 2),
    (("calibrate", "nccl-tests", "{tmp}/failed.log", "--out", "{tmp}/c.json"), "nccl-tests found wrong results", 2),
    (("whatif", "--profile", "{tmp}/late.bk.log", "--iteration-time", "0.001"), "after the iteration", 2),
    ((*STAR4, "--gamma", "1e308"), "--gamma 1e+308: give a reduction cost in seconds per byte from 0 to 0.001", 2),
    (("whatif", "--store", "{tmp}/a_file"), "is not an SQLite file", 2),
    (("whatif", "--compression", "-1"), "--compression -1: give ratios > 0", 2),
    (("whatif", "--compression", "0"), "--compression 0: give ratios > 0", 2),
    ((*SIM, "--cluster", "{tmp}/missing.json"), "no such file and no preset of that name", 2),
    # issue 38: the LLM job's counts bounded where every command that takes a job builds it (workload/parallel.py)
    (("whatif", "llm", "--gpus", "999999999999999992"), "a job here has at most 1,048,576 GPUs", 2),
    (("whatif", "llm", "--gbs", "8000000000"), "a step here takes at most 262,144", 2),
    (("calibrate", "step", "--gbs", "8000000000", "--gpus", "64", "--step-time", "1s", "--out", "{tmp}/c.json"),
     "a step here takes at most 262,144", 2),
    # issue 38: one validation of (model, split) for whatif llm, calibrate step, plan and train (workload/job.py)
    (("whatif", "llm", "--gpus", "64", "--ep", "2"), "--ep 2 needs an MoE model", 2),
    (("whatif", "llm", "--model", "mixtral-8x7b", "--gpus", "48", "--tp", "2", "--ep", "3"),
     "its 8 experts do not split over --ep 3", 2),
    (("whatif", "llm", "--model", "{tmp}/heads20.json", "--gpus", "64", "--tp", "8"),
     "20 attention heads and 20 key/value heads must split over --tp 8", 2),
    (("whatif", "llm", "--model", "{tmp}/moe-keys.json"), "no expert count is given", 2),
    (("whatif", "llm", "--model", "gpt3-175b", "--gpus", "24", "--tp", "3", "--seq", "2049", "--no-sequence-parallel"),
     "--gpus 24 --tp 3 on NVLink domains of 8 GPUs", 2),
    (("whatif", "llm", "--gpus", "96", "--tp", "2", "--pp", "8"), "a dp group of 6 GPUs", 2),
    (("calibrate", "step", "--model", "llama3-70b", "--gpus", "8", "--tp", "8", "--gbs", "8", "--step-time", "10s",
      "--out", "{tmp}/c.json"), "does not fit: needs", 2),
    (("calibrate", "step", "--gpus", "64", "--ep", "2", "--gbs", "64", "--step-time", "1s", "--out", "{tmp}/c.json"),
     "--ep 2 needs an MoE model", 2),
    (("plan", "--model", "{tmp}/not-json.json", "--gpus", "8", "--clusters", "dgx-h100"),
     "--model {tmp}/not-json.json is not a JSON config.json", 2),
    (("plan", "--model", "{tmp}/null.json", "--gpus", "8", "--clusters", "dgx-h100"),
     "null.json: expected a JSON object", 2),
    (("plan", "--model", "{tmp}/string-key.json", "--gpus", "8"), "string-key.json: hidden_size 'big'", 2),
    # issue 38: chakra output paths checked before the work
    (("chakra", "example", "--out", "{tmp}/et/x"), "--out {tmp}/et/x.0.et: that is a directory", 2),
    (("chakra", "example", "--out", "{tmp}/a_file/x"), "that is a file", 2),
    (("chakra", "example", "--out", "/proc/x"), "--out /proc/x.0.et: not a regular file location", 2),
    (("chakra", "run", "{tmp}/demo", "--out", "{tmp}/et/x"), "--out {tmp}/et/x.0.et: that is a directory", 2),
    # issue 38: chakra counts bounded
    (("chakra", "example", "--out", "{tmp}/y", "--ranks", "1000000"), "from 4 to 1,024", 2),
    (("chakra", "run", "{tmp}/foreign.1000000000.et"), "a trace here has at most 131,072", 2),
    (("chakra", "run", "{tmp}/demo", "--num-gpus", "100000000"), "--num-gpus 100,000,000: a trace here has at most", 2),
    # issue 38: untrusted trace files: bounded reads, typed values, the file and node named
    (("chakra", "show", "{tmp}/zeros.et"), "zeros.et: more than 1,000,000 nodes", 2),
    (("chakra", "show", "{tmp}/bomb.et.gz"), "bomb.et.gz: decompresses to more than 256 MiB", 2),
    (("chakra", "show", "{tmp}/nan-duration.0.et"), "nan-duration.0.et: node 0 ('n0'): fabriclab_duration_s nan", 2),
    (("chakra", "run", "{tmp}/neg-duration.0.et"), "fabriclab_duration_s -1.0: give a finite number >= 0", 2),
    (("chakra", "show", "{tmp}/inf-duration.0.et"), "fabriclab_duration_s inf", 2),
    (("chakra", "show", "{tmp}/nan-flops.0.et"), "node 0 ('n0'): num_ops nan", 2),
    (("chakra", "show", "{tmp}/string-rank.0.et"), "string-rank.0.et: node 0 ('n0'): comm_dst 'one'", 2),
    (("chakra", "show", "{tmp}/string-meta-rank.0.et"), "metadata fabriclab_rank 'zero'", 2),
    (("chakra", "run", "{tmp}/send-nowhere.0.et"), "comm_dst 7: not a rank of this 1-rank trace", 2),
    (("chakra", "run", "{tmp}/inf-size.0.et"), "node 0 ('n0'): comm_size inf", 2),
    (("chakra", "run", "{tmp}/neg-size.0.et"), "node 0 ('n0'): comm_size -5", 2),
    # issue 38: a store row that parses but is no record: `results show` of it names it (list skips it)
    (("results", "show", "2", "--store", "{tmp}/bad-records.db"), "record 2 in", 2),
    (("results", "diff", "1", "3", "--store", "{tmp}/bad-records.db"), "(not a JSON object but null;", 2),
]

LOGS = Path(__file__).resolve().parents[2] / "examples" / "nccl-tests-a100"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("bad-inputs")
    (tmp / "a_file").write_text("not a folder\n")
    (tmp / "junk.bin").write_bytes(bytes(range(256)) * 4)
    (tmp / "nan.json").write_text(json.dumps({"model": "m", "device": "d", "batch_size": 32,
                                              "iteration_s": float("nan"),
                                              "grads": [{"name": "g", "size_bytes": 4, "ready_s": 0.001}]}))
    (tmp / "nan.bk.log").write_text("comment\n1\n2\n10,400\nnan,400\n")
    (tmp / "other_kind.json").write_text(json.dumps(make_record("whatif", {}, [])))
    (tmp / "empty_runs.json").write_text(json.dumps(make_record("validate", {}, {"runs": [{"no": 1}]})))
    (tmp / "junk").mkdir()
    (tmp / "junk" / "fatness.csv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe" * 50)
    (tmp / "badheader").mkdir()
    (tmp / "badheader" / "fatness.csv").write_text("a,b,c\n1,2,3\n")
    (tmp / "h100.log").write_text((LOGS / "nccl_16.log").read_text().replace("A100-SXM4-40GB", "H100 80GB HBM3"))
    (tmp / "failed.log").write_text((LOGS / "nccl_2.log").read_text().replace(
        "# Out of bounds values : 0 OK", "# Out of bounds values : 48 FAILED"))
    (tmp / "late.bk.log").write_text("comment\n1\n2\n1000,400\n1000,400\n")  # ready at 2 ms
    _llm_configs(tmp)
    _traces(tmp)
    _bad_records(tmp / "bad-records.db")
    return tmp


def _llm_configs(tmp: Path) -> None:
    dense = {"hidden_size": 2560, "num_attention_heads": 20, "intermediate_size": 10240, "num_hidden_layers": 4,
             "vocab_size": 32000, "max_position_embeddings": 2048}
    (tmp / "heads20.json").write_text(json.dumps(dense))
    (tmp / "moe-keys.json").write_text(json.dumps({**dense, "num_experts_per_tok": 2, "moe_intermediate_size": 64}))
    (tmp / "string-key.json").write_text(json.dumps({**dense, "hidden_size": "big"}))
    (tmp / "not-json.json").write_text("{not json")
    (tmp / "null.json").write_text("null")


def _traces(tmp: Path) -> None:
    """A good trace, and files with the faults of issue 38 (see tests/workload/test_chakra_limits.py)."""
    import math
    import zlib

    from fabriclab.whatif.graph_run import sample_graphs
    from fabriclab.workload.chakra import graph_nodes, write_et
    from fabriclab.workload.etfile import COMM_COLL_NODE, COMM_SEND_NODE, COMP_NODE, EtAttr, EtNode, write_et_file

    write_et(sample_graphs(4), tmp / "demo")
    (tmp / "et" / "x.0.et").mkdir(parents=True)
    write_et_file(tmp / "foreign.1000000000.et", graph_nodes(sample_graphs(4)[1]))  # no metadata: foreign
    (tmp / "zeros.et").write_bytes(bytes(16 << 20))
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(16 << 20)
    (tmp / "bomb.et.gz").write_bytes(b"".join(squeeze.compress(zeros) for _ in range(17)) + squeeze.flush())
    meta = [EtAttr("fabriclab_graph", "int64", 2), EtAttr("fabriclab_rank", "int64", 0),
            EtAttr("fabriclab_num_ranks", "int64", 4)]

    def node(kind, *attrs):
        return [EtNode(id=0, name="n0", type=kind, attrs=(EtAttr("is_cpu_op", "bool", False), *attrs))]

    coll = (EtAttr("comm_type", "int64", 0),)
    for name, metadata, nodes in (
            ("nan-duration", meta, node(COMP_NODE, EtAttr("fabriclab_duration_s", "double", math.nan))),
            ("neg-duration", meta, node(COMP_NODE, EtAttr("fabriclab_duration_s", "double", -1.0))),
            ("inf-duration", meta, node(COMP_NODE, EtAttr("fabriclab_duration_s", "double", math.inf))),
            ("nan-flops", (), node(COMP_NODE, EtAttr("num_ops", "double", math.nan))),
            ("string-rank", (), node(COMM_SEND_NODE, EtAttr("comm_dst", "string", "one"),
                                     EtAttr("comm_size", "int64", 8))),
            ("string-meta-rank", [meta[0], EtAttr("fabriclab_rank", "string", "zero"), meta[2]], node(COMP_NODE)),
            ("send-nowhere", (), node(COMM_SEND_NODE, EtAttr("comm_dst", "int32", 7), EtAttr("comm_size", "int64", 8))),
            ("inf-size", (), node(COMM_COLL_NODE, *coll, EtAttr("comm_size", "double", math.inf))),
            ("neg-size", (), node(COMM_COLL_NODE, *coll, EtAttr("comm_size", "int64", -5)))):
        write_et_file(tmp / f"{name}.0.et", nodes, metadata=metadata)


def _bad_records(path: Path) -> None:
    """A store with a good record (1), then rows that parse but are no record: {} (2), null (3)."""
    import sqlite3

    from fabriclab.report.store import add_record

    add_record(make_record("whatif", {}, []), path)
    with sqlite3.connect(path) as conn:
        for text in ("{}", "null"):
            conn.execute("INSERT INTO records (kind, created_utc, record_json) VALUES ('x', '2026', ?)", (text,))


def run_cli(args: list[str], store: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "FABRICLAB_STORE": str(store), "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "fabriclab", *args], capture_output=True, text=True,
                          timeout=TIME_LIMIT_S, env=env, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def outcomes(files) -> dict[tuple[str, ...], subprocess.CompletedProcess | None]:
    """Every case's process (None: it ran past TIME_LIMIT_S), WORKERS at a time."""
    stores = files / "stores"
    stores.mkdir()

    def run(k_args):
        k, args = k_args
        argv = [a.replace("{tmp}", str(files)).replace("{logs}", str(LOGS)) for a in args]
        try:
            return args, run_cli(argv, stores / f"results-{k}.db")
        except subprocess.TimeoutExpired:
            return args, None

    with ThreadPoolExecutor(WORKERS) as pool:
        return dict(pool.map(run, enumerate(dict.fromkeys(args for args, _, _ in CASES))))


def test_the_table_is_large_enough():
    assert len(CASES) >= 35


@pytest.mark.parametrize("args, fragment, code", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_input_is_one_line(files, outcomes, args, fragment, code):
    done = outcomes[args]
    assert done is not None, f"fabriclab {' '.join(args)} ran past {TIME_LIMIT_S} s"
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, (done.returncode, done.stdout[-1000:], done.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-2000:]
    assert fragment.replace("{tmp}", str(files)) in lines[0], lines[0]
    assert "Traceback" not in done.stdout + done.stderr


def test_a_cut_or_nan_row_is_not_done_and_is_repaired(tmp_path):
    """Resume does not trust its CSV: a last row cut inside a number (no newline) or holding NaN is
    computed again, and a row cut mid-field does not glue to the next one."""
    from fabriclab.bench import fatness

    points = [p for p in fatness.fatness_points() if p.hosts == 128 and p.link_GBps == 4
              and p.latency_us == 0.2 and p.bisection == "1" and p.method in ("ring", "parameter-server")]
    csv_path = tmp_path / "fatness.csv"
    rows = list(fatness.run_points(points, csv_path))
    assert len(rows) == 2
    text = csv_path.read_text()
    header, ring, ps = text.splitlines()
    nan_ring = ring.replace(ring.split(",")[7], "nan")
    csv_path.write_text(f"{header}\n{nan_ring}\n{ps[:-3]}")  # ring NaN; ps cut inside its last number
    kept, notes = fatness.read_csv(csv_path)
    assert kept == [] and len(notes) == 2
    again = list(fatness.run_points(points, csv_path))
    assert [r["method"] for r in again] == ["ring", "parameter-server"]
    lines = csv_path.read_text().splitlines()
    assert lines[0] == header and len(lines) == 3 and all(line.count(",") == header.count(",") for line in lines)
    assert float(lines[1].split(",")[7]) == float(ring.split(",")[7])
    assert list(fatness.run_points(points, csv_path)) == []
