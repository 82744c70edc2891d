"""nccl-tests' text layout: written by fabriclab, read back by the parser, column for column."""

from dataclasses import replace
from pathlib import Path

import pytest

from fabriclab.fabric.cluster import a100_hdr_prior
from fabriclab.nccl.log_writer import format_nccl_tests
from fabriclab.nccl.logs import parse_nccl_tests, read_runs
from fabriclab.nccl.predict import predict_nccl_table, prediction_run

LOGS = Path(__file__).resolve().parents[2] / "examples" / "nccl-tests-a100"


@pytest.mark.skipif(not LOGS.is_dir(), reason=f"shared nccl-tests logs not at {LOGS}")
@pytest.mark.parametrize("n", [1, 8, 16])
def test_real_logs_round_trip(n):
    (run,) = read_runs(LOGS / f"nccl_{n}.log")
    text = format_nccl_tests(run, notes=("a note",))
    (again,) = parse_nccl_tests(text, "again")
    assert again.rows == run.rows and again.hosts == run.hosts
    assert again.gpus_per_process == run.gpus_per_process and again.collective == run.collective
    assert text.startswith("# fabriclab a note\n")


def test_rows_use_nccl_tests_field_widths():
    rows = predict_nccl_table(a100_hdr_prior(), 16, [1024, 1 << 20, 1 << 30])
    text = format_nccl_tests(prediction_run(a100_hdr_prior(), 16, rows))
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    # %12li  %12li  %8s  %6s  %6i, then per placement  %7s  %6.2f  %6.2f  %5s
    widths = [12, 2 + 12, 2 + 8, 2 + 6, 2 + 6] + [2 + 7, 2 + 6, 2 + 6, 2 + 5] * 2
    for line in lines:
        assert len(line) == sum(widths)
        assert line[:12].strip() == line.split()[0]
    assert "#  Rank 15 Group  0 Pid   1015 on server-001 device  7 [0x00] A100-SXM4-40GB" in text
    (run,) = parse_nccl_tests(text, "p")
    assert [r.size_bytes for r in run.rows] == [1024, 1 << 20, 1 << 30]
    for parsed, row in zip(run.rows, rows):
        assert parsed.busbw_GBps == pytest.approx(row["busbw_GBps"], abs=0.006)
        assert parsed.time_us == pytest.approx(row["time_us"], rel=1e-3)


DATA = Path(__file__).resolve().parent / "data"


def _same(a, b):
    assert (a.rows, a.hosts, a.collective, a.gpus_per_process, a.device_name, a.nccl_version) == \
        (b.rows, b.hosts, b.collective, b.gpus_per_process, b.device_name, b.nccl_version)


@pytest.mark.parametrize("path", sorted(DATA.glob("*.log")), ids=lambda p: p.name)
def test_every_sample_round_trips(path):
    runs = read_runs(path)
    text = "".join(format_nccl_tests(run) for run in runs)  # several runs: one multi-test log
    again = parse_nccl_tests(text, "again")
    assert len(again) == len(runs)
    for run, back in zip(runs, again):
        _same(run, back)
    assert text.count("# Collective test starting: ") == text.count("# Collective test concluded: ") == len(runs)


def test_the_header_names_the_binary_and_the_nccl_version():
    (run,) = read_runs(DATA / "sendrecv_perf_2x2_h100.log")
    text = format_nccl_tests(run)
    assert text.startswith("# nccl-tests version fabriclab nccl-headers=22304 nccl-library=22304\n"
                           "# Collective test starting: sendrecv_perf\n# nThread 1 nGpus 2 ")
    assert "#  Rank  3 Group  0 Pid   1001 on    dgx-b08 device  1" in text
    old = replace(run, nccl_version="2.7.8", collective="alltoall")
    assert "nccl-library=2708\n# Collective test starting: alltoall_perf\n" in format_nccl_tests(old)
    assert "nccl-tests version" not in format_nccl_tests(replace(run, nccl_version=None))
    with pytest.raises(ValueError, match="nccl-tests has no binary for 'gather'"):
        format_nccl_tests(replace(run, collective="gather"))


def test_times_keep_every_digit_any_nccl_tests_version_printed():
    (run,) = read_runs(DATA / "sendrecv_perf_2x2_h100.log")
    rows = (replace(run.rows[0], time_us=12345.67, inplace_time_us=99.5), replace(run.rows[1], time_us=251757.0))
    text = format_nccl_tests(replace(run, rows=rows))
    assert "  12345.7  " in text and "    99.50  " in text and "   251757  " in text


@pytest.mark.parametrize("gpus", [1024, 16_384])  # 100,000 reads the same and costs 17 s
def test_a_large_prediction_summarises_its_devices_in_one_line(gpus):
    rows = predict_nccl_table(a100_hdr_prior(), gpus, [1 << 20])
    text = format_nccl_tests(prediction_run(a100_hdr_prior(), gpus, rows), notes=("prediction",))
    ranks = [line for line in text.splitlines() if line.startswith("#  Rank ")]
    assert [line.split()[2] for line in ranks] == [str(r) for r in range(8)]  # the first server's ranks only
    assert all("on server-000 " in line for line in ranks)
    assert f"#  {gpus:,} ranks on {gpus // 8:,} servers (server-000 to server-" in text
    assert len(text.splitlines()) < 30 and max(len(line) for line in text.splitlines()) <= 200
    (back,) = parse_nccl_tests(text, "p")  # read back with the layout the summary states, never as 8 ranks
    assert (back.num_ranks, back.num_servers, back.gpus_per_server) == (gpus, gpus // 8, 8)
    with pytest.raises(ValueError, match="lists 7 ranks of the first"):
        parse_nccl_tests(text.replace(ranks[-1] + "\n", ""), "p")
