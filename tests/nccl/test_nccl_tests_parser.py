"""The nccl-tests reader on the shared real logs and on the forms real logs take, and its errors."""

from pathlib import Path

import pytest

from fabriclab.nccl.logs import parse_bench_table, parse_nccl_tests, read_runs

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


def test_collective_inferred_from_busbw_when_the_log_does_not_name_it():
    text = NEW_LAYOUT.replace("# Collective test starting: reduce_scatter_perf\n", "")
    assert parse_nccl_tests(text, "x")[0].collective == "reduce_scatter"
    gather = text.replace("     sum", "    none")
    assert parse_nccl_tests(gather, "x")[0].collective == "allgather"


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
