"""The nccl-tests reader on the shared real logs and on the forms real logs take, and its errors."""

from pathlib import Path

import pytest

from fabriclab.nccl.logs import (collective_name, parse_bench_table, parse_nccl_tests, read_runs, version_code,
                                 version_from_code)

LOGS = Path(__file__).resolve().parents[2] / "examples" / "nccl-tests-a100"
needs_logs = pytest.mark.skipif(not LOGS.is_dir(), reason=f"shared nccl-tests logs not at {LOGS}")

# (GPUs, servers, GPUs per process, rows, first size, last size) as the README describes the files.
EXPECTED = {1: (1, 1, 1, 28, 8, 1 << 30), 2: (2, 1, 2, 28, 8, 1 << 30), 4: (4, 1, 4, 28, 8, 1 << 30),
            8: (8, 1, 8, 28, 8, 1 << 30), 16: (16, 2, 1, 25, 1024, 16 << 30)}


def _text(n: int) -> str:
    return (LOGS / f"nccl_{n}.log").read_text()


@needs_logs
@pytest.mark.parametrize("n", sorted(EXPECTED))
def test_every_shared_log(n):
    (run,) = read_runs(LOGS / f"nccl_{n}.log")
    gpus, servers, per_process, rows, first, last = EXPECTED[n]
    assert run.collective == "allreduce"
    assert (run.num_ranks, run.num_servers, run.gpus_per_process, len(run.rows)) == (gpus, servers, per_process, rows)
    assert run.gpus_per_server == gpus // servers
    assert (run.rows[0].size_bytes, run.rows[-1].size_bytes) == (first, last)
    assert run.device_name == "A100-SXM4-40GB"
    for row in run.rows:  # every row carries both placements, and busbw is algbw x 2(n-1)/n as printed
        assert row.inplace_time_us is not None and row.count * 4 == row.size_bytes
        if row.algbw_GBps >= 1:
            assert row.busbw_GBps == pytest.approx(row.algbw_GBps * 2 * (n - 1) / n, rel=0.01)


@needs_logs
def test_values_of_known_rows():
    (run,) = read_runs(LOGS / "nccl_16.log")
    row = next(r for r in run.rows if r.size_bytes == 1 << 30)
    assert (row.time_us, row.algbw_GBps, row.busbw_GBps, row.error) == (16170.0, 66.40, 124.50, "N/A")
    assert (row.inplace_time_us, row.inplace_busbw_GBps) == (16166.0, 124.53)
    assert run.servers == ("node-000000", "node-000002")
    (single,) = read_runs(LOGS / "nccl_8.log")
    assert single.rows[-1].error == "2e-07" and single.rows[-1].time_us == 8139.2


@needs_logs
def test_prefixes_do_not_change_the_rows():
    plain = parse_nccl_tests(_text(8), "plain")[0]
    mpirun = parse_nccl_tests("".join(f"[1,0]<stdout>:{line}\n" for line in _text(8).splitlines()), "mpirun")[0]
    srun = parse_nccl_tests("".join(f"0: {line}\n" for line in _text(8).splitlines()), "srun")[0]
    assert mpirun.rows == plain.rows == srun.rows and mpirun.hosts == plain.hosts
    stripped = "".join(line.split(":", 1)[1] + "\n" if line.startswith("[1,0]") else line + "\n"
                       for line in _text(16).splitlines())
    assert parse_nccl_tests(stripped, "x")[0].rows == read_runs(LOGS / "nccl_16.log")[0].rows


@needs_logs
def test_nccl_info_lines_and_other_ranks_chatter_are_skipped():
    lines = _text(16).splitlines()
    noisy = lines[:20] + ["[1,3]<stdout>:10-0-0-3:1234:1290 [3] NCCL INFO Channel 00 : 3[c7000] -> 4[d0000]",
                          "[1,0]<stderr>:node-000000:65741:65741 [0] NCCL INFO Launch mode Parallel"] + lines[20:]
    assert parse_nccl_tests("\n".join(noisy), "noisy")[0].rows == read_runs(LOGS / "nccl_16.log")[0].rows


NEW_LAYOUT = """# nccl-tests version 2.13.8 nccl-headers=21803 nccl-library=21803
# Collective test starting: reduce_scatter_perf
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  15784 on  nid007106 device  0 [0009:01:00] NVIDIA GH200 120GB
#  Rank  1 Group  0 Pid  24926 on  nid007109 device  0 [0009:01:00] NVIDIA GH200 120GB
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
     1048576        131072     float     sum      -1   339.61    3.09    1.54       0   335.85    3.12    1.56       0
     2097152        262144     float     sum      -1   355.53    5.90    2.95       0   361.77    5.80    2.90       0
     4194304        524288     float     sum      -1   476.28    8.81    4.40       0   471.14    8.90    4.45       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 2.97
#
"""


def test_new_layout_with_root_and_wrong_columns():
    (run,) = parse_nccl_tests(NEW_LAYOUT, "gh200.log")
    assert run.collective == "reduce_scatter" and run.num_servers == 2 and run.gpus_per_server == 1
    assert run.rows[0].root == -1 and run.rows[0].error == "0" and run.rows[2].inplace_time_us == 471.14
    assert run.device_name == "NVIDIA GH200 120GB"


def test_collective_inferred_from_the_columns_when_the_log_does_not_name_it():
    text = NEW_LAYOUT.replace("# Collective test starting: reduce_scatter_perf\n", "")
    assert parse_nccl_tests(text, "x")[0].collective == "reduce_scatter"  # count per rank, a reduction
    gather = text.replace("     sum", "    none")  # allgather and alltoall print the same columns
    with pytest.raises(ValueError, match="fit allgather and alltoall alike: name the file after the binary"):
        parse_nccl_tests(gather, "x")
    assert parse_nccl_tests(gather, "x", collective="alltoall_perf")[0].collective == "alltoall"
    assert parse_nccl_tests(gather, "logs/all_gather_perf_2.log")[0].collective == "allgather"
    # the log's own name beats the argument and the file name
    assert parse_nccl_tests(NEW_LAYOUT, "all_gather_perf.log", collective="allgather")[0].collective == \
        "reduce_scatter"
    with pytest.raises(ValueError, match=r"not 1\.000 as allreduce \(from collective='allreduce'\)"):
        parse_nccl_tests(text, "x", collective="allreduce")


@needs_logs
def test_two_runs_in_one_file_are_two_runs():
    runs = parse_nccl_tests(_text(2) + _text(4), "both.log")
    assert [r.num_ranks for r in runs] == [2, 4]
    assert runs[1].source == "both.log (run 2)"


@pytest.mark.parametrize("text, words", [
    ("", ["empty.log", "no nccl-tests output"]),
    ("\x00\x01garbage\nnot a log at all\n", ["empty.log", "no nccl-tests output"]),
    ("     1048576        262144     float     sum    105.9    9.90   17.33      0\n", ["line 1", "before any"]),
])
def test_garbage_is_an_error_naming_the_file(text, words):
    with pytest.raises(ValueError) as err:
        parse_nccl_tests(text, "empty.log")
    assert all(w in str(err.value) for w in words)


@needs_logs
def test_truncated_logs_are_errors():
    lines = _text(8).splitlines()
    cut_row = "\n".join(lines[:30]) + "\n" + lines[30][:40]
    with pytest.raises(ValueError, match=r"cut\.log, line 31: expected 12 fields .*found 3"):
        parse_nccl_tests(cut_row, "cut.log")
    no_footer = "\n".join(lines[:30])
    with pytest.raises(ValueError, match=r"cut\.log: the run that starts at line 1 is cut off at the end .*15 rows"):
        parse_nccl_tests(no_footer, "cut.log")
    no_devices = "\n".join(line for line in lines if "Rank" not in line)
    with pytest.raises(ValueError, match="Using devices"):
        parse_nccl_tests(no_devices, "cut.log")
    cut_then_new = "\n".join(lines[:20]) + "\n" + _text(2)
    with pytest.raises(ValueError, match="cut off before line 21"):
        parse_nccl_tests(cut_then_new, "cut.log")


@needs_logs
def test_mixed_logs_are_errors():
    lines = _text(16).splitlines()
    other = [line.replace("[1,0]", "[1,5]") for line in lines]
    interleaved = lines[:30] + [other[30]] + lines[31:]
    with pytest.raises(ValueError, match=r"mixed\.log, line 31: rows from two processes"):
        parse_nccl_tests("\n".join(interleaved), "mixed.log")
    rows8 = [line for line in _text(8).splitlines() if line.strip() and line.strip()[0].isdigit()]
    shuffled = _text(8).splitlines()
    shuffled[15], shuffled[25] = shuffled[25], shuffled[15]
    with pytest.raises(ValueError, match="mixed"):
        parse_nccl_tests("\n".join(shuffled), "mixed.log")
    # the header of a 2-rank run above the rows of an 8-rank run: busbw/algbw gives it away
    two_rank_header = [line for line in _text(2).splitlines() if line.startswith("#") and "Avg" not in line
                       and "Out of" not in line]
    wrong = "\n".join(two_rank_header + rows8) + "\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1\n"
    with pytest.raises(ValueError, match="busbw/algbw is 1.750 on 2 ranks"):
        parse_nccl_tests(wrong, "mixed.log")


def test_read_runs_names_a_missing_file(tmp_path):
    with pytest.raises(ValueError, match="cannot read .*nope.log"):
        read_runs(tmp_path / "nope.log")


BENCH_PLAIN = """# collectives bench: allreduce, 2 ranks, 2 iters (+1 warm-up); GB/s = 1e9 B/s
# algo    size(B)  count(elements)  type     redop  root    time(us)  algbw(GB/s)  busbw(GB/s)  vs native  #wrong
  ring       1024              256  float32  sum      -1     13545.7        0.000        0.000       0.16       0
  native     1024              256  float32  sum      -1      2112.4        0.000        0.000       1.00       0
  ring       4096             1024  float32  sum      -1      2481.6        0.002        0.002       1.10       0
  native     4096             1024  float32  sum      -1      2725.7        0.002        0.002       1.00       0
"""


def test_collectives_bench_plain_and_csv(tmp_path):
    runs = parse_bench_table(BENCH_PLAIN, "bench.txt")
    assert [r.label for r in runs] == ["ring", "native"]
    assert runs[1].rows[1].time_us == 2725.7 and runs[1].num_ranks == 2 and runs[1].layout_assumed
    lines = BENCH_PLAIN.splitlines()
    csv_text = lines[0] + "\n" + "\n".join(",".join(line.lstrip("# ").replace("vs native", "vs-native").split())
                                           for line in lines[1:]) + "\n"
    assert [r.rows for r in parse_bench_table(csv_text, "b.csv")] == [r.rows for r in runs]
    path = tmp_path / "bench.txt"
    path.write_text(BENCH_PLAIN)
    assert [r.label for r in read_runs(path)] == ["ring", "native"]
    with pytest.raises(ValueError, match=r"bench\.txt, line 4: expected 11 cells, found 4"):
        parse_bench_table("\n".join(lines[:3] + [lines[3][:40]]), "bench.txt")
    with pytest.raises(ValueError, match="title"):
        parse_bench_table("\n".join(lines[1:]), "bench.txt")


def test_emu_run_output_with_rank_prefixes_reads_as_the_bare_table():
    """`fabriclab emu run` prefixes lines with `[RANK] ` and ends with its exit summary."""
    prefixed = "".join(f"[0] {line}\n" for line in BENCH_PLAIN.splitlines()) + "all 2 ranks exited 0\n"
    assert [r.rows for r in parse_bench_table(prefixed, "emu.txt")] == \
        [r.rows for r in parse_bench_table(BENCH_PLAIN, "bench.txt")]


@needs_logs
def test_a_row_that_is_not_a_number_is_an_error_naming_file_and_line():
    lines = _text(8).splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("1048576 "))
    words = lines[at].split()
    words[5] = "nan"  # the out-of-place time
    lines[at] = "  ".join(words)
    with pytest.raises(ValueError, match=rf"x\.log, line {at + 1}: .*not a number"):
        parse_nccl_tests("\n".join(lines) + "\n", "x.log")


# ---------------------------------------------------------------- every binary, from tests/nccl/data

DATA = Path(__file__).resolve().parent / "data"
FACTORS = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
           "reduce_scatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n,
           "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0, "sendrecv": lambda n: 1.0}  # src/<coll>.cu GetBw
PER_RANK = {"allgather", "reduce_scatter", "alltoall"}  # nccl-tests prints count per rank, size in total
BYTES = {"float": 4, "bfloat16": 2}
# file -> per run: (collective, ranks, servers, GPUs per process, NCCL version, rows, first size, last size, root)
SAMPLES = {
    "all_gather_perf_2x8_h100.log": [("allgather", 16, 2, 1, "2.27.3", 25, 64, 1 << 30, -1)],
    "reduce_scatter_2x4_a100.log": [("reduce_scatter", 8, 2, 1, "2.18.3", 21, 1024, 1 << 30, -1)],
    "alltoall_perf_2x8_h100.log": [("alltoall", 16, 2, 1, "2.19.3", 21, 1024, 1 << 30, -1)],
    "alltoall_2x4_v100_v2.11.log": [("alltoall", 8, 2, 1, None, 17, 4096, 1 << 28, -1)],
    "broadcast_perf_2x8_h100.log": [("broadcast", 16, 2, 1, "2.21.5", 11, 1 << 20, 1 << 30, 0)],
    "job-1187_2x8_h100.log": [("reduce", 16, 2, 1, None, 11, 1 << 20, 1 << 30, 0)],
    "sendrecv_perf_2x2_h100.log": [("sendrecv", 4, 2, 2, "2.23.4", 15, 1 << 16, 1 << 30, -1)],
    "suite_2x8_h100.log": [(c, 16, 2, 1, "2.26.2", 15, 1 << 16, 1 << 30, -1)
                           for c in ("allreduce", "reduce_scatter", "alltoall")],
    "broadcast_perf_all_roots_2x2_a100.log": [("broadcast", 4, 2, 1, "2.21.5", 4, 1 << 20, 1 << 23, root)
                                              for root in range(4)],
}


def _close(printed: float, exact: float, time_us: float) -> bool:
    """`printed` equals `exact` to the printed precision, given that the time was printed rounded too
    (2 decimals below 100 us; 1 or 2 below 10 ms; 0 or 1 above, by nccl-tests version)."""
    half_unit = 0.005 if time_us < 100 else 0.05 if time_us < 10000 else 0.5
    return abs(printed - exact) <= 0.005 + exact * half_unit / time_us + 1e-9


def test_the_samples_cover_every_binary_read():
    assert {run[0] for runs in SAMPLES.values() for run in runs} == set(FACTORS)
    assert sorted(p.name for p in DATA.glob("*.log")) == sorted(SAMPLES)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_sample(name):
    runs = read_runs(DATA / name)
    assert len(runs) == len(SAMPLES[name])
    for run, (coll, ranks, servers, per_process, version, rows, first, last, root) in zip(runs, SAMPLES[name]):
        assert (run.collective, run.num_ranks, run.num_servers, run.gpus_per_process) == \
            (coll, ranks, servers, per_process)
        assert run.gpus_per_server == ranks // servers and run.nccl_version == version
        assert (len(run.rows), run.rows[0].size_bytes, run.rows[-1].size_bytes) == (rows, first, last)
        factor = FACTORS[coll](ranks)
        for row in run.rows:
            assert row.root == root and row.redop == ("sum" if coll in ("allreduce", "reduce", "reduce_scatter",
                                                                       "sendrecv") else "none")
            assert row.count * BYTES[row.dtype] * (ranks if coll in PER_RANK else 1) == row.size_bytes
            placements = [(row.time_us, row.algbw_GBps, row.busbw_GBps),
                          (row.inplace_time_us, row.inplace_algbw_GBps, row.inplace_busbw_GBps)]
            for time_us, algbw, busbw in placements:
                exact = row.size_bytes / (time_us * 1e3)  # GB/s
                assert _close(algbw, exact, time_us), (name, row)
                assert _close(busbw, exact * factor, time_us), (name, row)


def test_sample_details():
    (gather,) = read_runs(DATA / "all_gather_perf_2x8_h100.log")
    assert gather.device_name == "NVIDIA H100 80GB HBM3" and gather.servers == ("h100-node-017", "h100-node-018")
    assert gather.rows[0].error == "0" and gather.rows[0].count == 1  # the size-0 rows (count < ranks) are left out
    (old,) = read_runs(DATA / "alltoall_2x4_v100_v2.11.log")
    assert old.rows[0].error == "0e+00" and old.rows[-1].inplace_time_us == 21957.0
    (a2a,) = read_runs(DATA / "alltoall_perf_2x8_h100.log")
    assert a2a.rows[-1].error == "N/A" and a2a.rows[-1].inplace_error == "N/A"
    suite = read_runs(DATA / "suite_2x8_h100.log")
    assert [r.source.split("/")[-1] for r in suite] == [f"suite_2x8_h100.log (run {i})" for i in (1, 2, 3)]
    assert suite[0].rows[0].dtype == "bfloat16"
    roots = read_runs(DATA / "broadcast_perf_all_roots_2x2_a100.log")
    assert [r.source.rsplit(" ", 2)[1:] for r in roots] == [["(root", f"{i})"] for i in range(4)]


def test_the_nccl_version_from_either_line():
    base = NEW_LAYOUT.replace("# nccl-tests version 2.13.8 nccl-headers=21803 nccl-library=21803\n", "")
    assert parse_nccl_tests(base, "x")[0].nccl_version is None
    assert parse_nccl_tests(NEW_LAYOUT, "x")[0].nccl_version == "2.18.3"
    info = "node-0:123:123 [0] NCCL INFO NCCL version 2.7.8+cuda11.0\n"
    at = base.index("#\n#  ")
    assert parse_nccl_tests(base[:at] + info + base[at:], "x")[0].nccl_version == "2.7.8"
    old_code = NEW_LAYOUT.replace("nccl-library=21803", "nccl-library=2708")
    assert parse_nccl_tests(old_code, "x")[0].nccl_version == "2.7.8"
    both = NEW_LAYOUT[:NEW_LAYOUT.index("#\n#  ")] + info + NEW_LAYOUT[NEW_LAYOUT.index("#\n#  "):]
    with pytest.raises(ValueError, match=r"x, line 8: NCCL 2\.7\.8, but line 1 says NCCL 2\.18\.3"):
        parse_nccl_tests(both, "x")


def test_versions_codes_both_ways():
    assert [version_from_code(c) for c in (21903, 22703, 2708, 2408)] == ["2.19.3", "2.27.3", "2.7.8", "2.4.8"]
    assert [version_code(v) for v in ("2.19.3", "2.9.9", "2.8.4", "3.0.1")] == [21903, 20909, 2804, 30001]


def test_refused_and_unknown_binaries_name_what_is_read():
    hyper = NEW_LAYOUT.replace("reduce_scatter_perf", "hypercube_perf")
    with pytest.raises(ValueError, match=r"x, line 2: hypercube_perf is not read: fabriclab models all_reduce_perf, "
                                         r"all_gather_perf, .*sendrecv_perf"):
        parse_nccl_tests(hyper, "x")
    with pytest.raises(ValueError, match="gather_perf is not read"):
        parse_nccl_tests(NEW_LAYOUT, "x", collective="gather")
    with pytest.raises(ValueError, match="unknown collective 'allgatherv'"):
        collective_name("allgatherv")
    cmd = "mpirun -np 2 ./build/scatter_perf -b 1M\n" + NEW_LAYOUT.replace("# Collective test starting: "
                                                                          "reduce_scatter_perf\n", "")
    with pytest.raises(ValueError, match="scatter_perf is not read"):
        parse_nccl_tests(cmd, "x")


def test_table_errors_name_the_line_and_what_was_expected():
    header = NEW_LAYOUT.replace("busbw  #wrong     time", "busbw  #bogus     time")
    with pytest.raises(ValueError, match=r"x, line 10: a column header with unknown columns #bogus: expected "
                                         r"nccl-tests' columns"):
        parse_nccl_tests(header, "x")
    lines = NEW_LAYOUT.splitlines()
    again = "\n".join(lines[:12] + [lines[12].replace("float", " half"), lines[11], lines[13]] + lines[14:]) + "\n"
    with pytest.raises(ValueError, match=r"x, line 14: the rows of float sum -1 start again after other rows"):
        parse_nccl_tests(again, "x")
    failed = NEW_LAYOUT.replace("values : 0 OK", "values : 48 FAILED")
    with pytest.raises(ValueError, match=r"x, line 15: .*48 FAILED.*wrong results"):
        parse_nccl_tests(failed, "x")


def test_a_command_line_before_the_run_names_its_binary():
    unnamed = NEW_LAYOUT.replace("# Collective test starting: reduce_scatter_perf\n", "")
    unnamed = unnamed.replace("     sum", "    none")  # allgather or alltoall: the columns do not tell
    cmd = "+ mpirun -np 2 -x NCCL_IB_HCA=mlx5 /opt/nccl-tests/build/all_gather_perf -b 1M -e 4M -f 2\n"
    assert parse_nccl_tests(cmd + unnamed, "x")[0].collective == "allgather"
    srun = "0: srun -N 2 ./build/alltoall_perf_mpi -b 1M\n"
    assert parse_nccl_tests(srun + unnamed, "x")[0].collective == "alltoall"
    chatter = "node-0:1:1 [0] NCCL INFO loaded ./all_reduce_perf\n"  # NCCL's own lines name nothing
    with pytest.raises(ValueError, match="alike"):
        parse_nccl_tests(chatter + unnamed, "x")


def test_later_columns_cputime_timestamps_and_per_iteration_statistics():
    """nccl-tests -C prints `cputime`, -T a `timestamp` after the in-place columns, -I 1 (2.19) i_min i_max
    i_p99 i_cv% after each placement's #wrong (src/util.cu writeResultHeader)."""
    (plain,) = parse_nccl_tests(NEW_LAYOUT, "x")
    lines = NEW_LAYOUT.splitlines()
    stamped = lines[:9] + [lines[9].replace("time", "cputime") + "            timestamp"]
    stamped += lines[10:11] + [line + "  2025-10-24 15:57:59" for line in lines[11:14]] + lines[14:]
    assert parse_nccl_tests("\n".join(stamped), "x")[0].rows == plain.rows
    stats = "  i_min    i_max    i_p99    i_cv%"
    header = lines[9].split("  #wrong")
    per_iter = lines[:9] + [header[0] + "  #wrong" + stats + header[1] + "  #wrong" + stats]
    for line in lines[11:14]:
        words = line.split()
        per_iter.append("  ".join(words[:9] + ["300.1", "380.2", "379.9", "3.15"] + words[9:] +
                                  ["301.0", "390.7", "388.2", "2.94"]))
    per_iter = per_iter[:10] + lines[10:11] + per_iter[10:] + lines[14:]
    assert parse_nccl_tests("\n".join(per_iter), "x")[0].rows == plain.rows


def test_the_bench_conclusion_after_the_table_is_not_a_row():
    """`collectives bench` ends with its verdict (stderr in a pipe; `emu run` merges it into the log)."""
    verdict = "conclusion: 1KB  n=30  within noise (spread +-45%): native, ring\n  native wins nowhere\n"
    merged = "".join(f"[0] {line}\n" for line in (BENCH_PLAIN + verdict).splitlines())
    assert [r.rows for r in parse_bench_table(merged, "emu.txt")] == \
        [r.rows for r in parse_bench_table(BENCH_PLAIN, "bench.txt")]
