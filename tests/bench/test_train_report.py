"""tf_cnn_benchmarks' numbers and lines, and the benchmark config's one-line errors."""

from __future__ import annotations

import pytest

from fabriclab.bench.train.run import TrainBenchConfig, check_batch
from fabriclab.bench.train.report import RULE, perf_timing, tf_cnn_lines, total_images_per_sec


def test_perf_timing_as_tf_cnn_benchmarks_computes_it():
    times = [0.5, 0.5, 1.0, 0.5]  # speeds 64, 64, 32, 64 at batch 32
    mean, uncertainty, jitter = perf_timing(32, times)
    assert mean == pytest.approx(32 / 0.625)
    assert uncertainty == pytest.approx(13.856406 / 2)  # population std of the speeds / sqrt(4)
    assert jitter == 0.0  # the median absolute deviation ignores the one slow step
    assert total_images_per_sec(times, 32) == pytest.approx(32 * 4 / 2.5)


def test_lines_at_step_one_every_display_interval_and_the_total():
    lines = tf_cnn_lines([0.5] * 20, [7.0] * 20, 32, 10)
    assert lines[0] == "Step\tImg/sec\ttotal_loss"
    assert lines[1] == "1\timages/sec: 64.0 +/- 0.0 (jitter = 0.0)\t7.000"
    assert [line.split("\t")[0] for line in lines[1:4]] == ["1", "10", "20"]
    assert lines[-3:] == [RULE, "total images/sec: 64.00", RULE]


@pytest.mark.parametrize("kwargs, message", [
    (dict(batch_size=30, num_ranks=4), "batch size 30 does not split over 4 ranks: use a multiple of 4, e.g. 32"),
    (dict(model="lenet"), "unknown model 'lenet'"),
    (dict(runtimes=("ours", "ours")), "unknown or repeated runtime"),
    (dict(replay="resnet50", data="/tmp/shards"), "replayed compute reads no data"),
    (dict(image_size=4), "image side 4 is outside"),
    (dict(trace_steps=99, steps=5), "trace steps 99"),
])
def test_config_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainBenchConfig(**kwargs)


def test_batch_check():
    check_batch(32, 4)
    with pytest.raises(ValueError, match="use a multiple of 3, e.g. 3"):
        check_batch(1, 3)
