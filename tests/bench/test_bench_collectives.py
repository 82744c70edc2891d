"""The collectives benchmark: rows and columns, bandwidth formulas, the correctness check (which must be
able to fail), input validation. The `fabriclab collectives bench` command: tests/cli/test_cli_collectives_bench.py."""

from __future__ import annotations

import dataclasses

import pytest

from fabriclab.bench.collectives.config import NATIVE_ONLY
from fabriclab.bench.collectives.exchange import exchange_count, exchange_inputs, reference_exchange
from fabriclab.bench.collectives.run import COLUMNS, DTYPE_SIZES, BenchConfig, bench_rank, run_bench
from fabriclab.collectives import registry
from fabriclab.collectives.schedule import RECV_COPY, RECV_REDUCE, Op, bus_bandwidth_factor
from fabriclab.runtime.launch import LaunchConfig, spawn

# Sizes are whole elements of every dtype used below (int64: 8 B); 8 B of float32 is 2 elements. One round
# of 3 iterations (no max_iters: no repetition): these tests check results, not which algorithm is faster.
SMALL = dict(sizes_bytes=(8, 1000, 1 << 16), iters=3, warmup=1, num_ranks=3, timeout_s=30)


def corrupted_build(collective, algo, num_ranks, count, root=0):
    """The registry's schedule with rank 0's first receive-and-reduce turned into a plain copy."""
    schedule = registry.build_schedule(collective, algo, num_ranks, count, root)
    steps = [list(map(list, rank_steps)) for rank_steps in schedule.steps]
    for step in steps[0]:
        for i, op in enumerate(step):
            if op.kind == RECV_REDUCE:
                step[i] = Op(RECV_COPY, op.peer, op.chunk)
                return dataclasses.replace(schedule, steps=tuple(tuple(map(tuple, s)) for s in steps))
    return schedule


def test_small_sweep_has_every_column_and_no_wrong_result():
    # rounds of 3 up to 9 iterations or 0.3 s: every rank stops after the same round (or the run would hang)
    config = BenchConfig(algos=("ring", "butterfly", "native"), op="allreduce", **SMALL | dict(max_iters=9,
                                                                                                max_time_s=0.3))
    progress, rounds = [], []
    rows = run_bench(config, on_row=progress.append, on_progress=rounds.append)
    assert [(r["algo"], r["size_bytes"]) for r in rows] == [
        (a, s) for a in ("ring", "butterfly", "native") for s in (8, 1000, 1 << 16)]
    assert sorted(map(str, progress)) == sorted(map(str, rows))  # rank 0 reported each row as it finished
    assert BenchConfig(**SMALL).repeat_cap.max_iters == 3  # without max_iters: one round, as bench.validate needs
    # after every round rank 0 says how the comparison stands; the last round of a size says why it stopped
    last = {m["size_bytes"]: m for m in rounds}
    for row in rows:
        assert row["iters"] in (3, 6, 9) and row["stop"] == last[row["size_bytes"]]["stop"] is not None
        assert last[row["size_bytes"]]["verdict"].num_samples == row["iters"]
        assert row["time_us_ci_low"] <= row["time_us_median"] <= row["time_us_ci_high"]
    for row in rows:
        assert set(COLUMNS) <= set(row)
        assert row["num_wrong"] == 0, row
        assert row["count"] == row["size_bytes"] // 4 and row["time_us"] > 0
        # nccl-tests: algbw = bytes / time, busbw = algbw * 2(n-1)/n for allreduce.
        assert row["algbw_GBps"] == pytest.approx(row["size_bytes"] / (row["time_us"] * 1e-6) / 1e9)
        assert row["busbw_GBps"] == pytest.approx(row["algbw_GBps"] * 2 * 2 / 3)


def every_collective(ctx):
    """Several configs inside one spawn: every collective, a rooted one with root 2, several dtypes."""
    rows = []
    for op, dtype, redop in (("reduce", "bfloat16", "sum"), ("broadcast", "int32", "sum"),
                             ("reduce_scatter", "float16", "max"), ("allgather", "int64", "sum"),
                             ("allreduce", "int32", "min")):
        config = BenchConfig(algos=("ring", "native"), op=op, dtype=dtype, redop=redop, root=2, **SMALL)
        rows += bench_rank(ctx, config)
    rows += bench_rank(ctx, BenchConfig(algos=("ring",), op="allreduce", **SMALL), corrupted_build)
    return rows


def test_every_collective_is_checked_and_a_corrupted_schedule_is_caught():
    rows = spawn(every_collective, config=LaunchConfig(num_ranks=3, timeout_s=30))[0]
    good, corrupted = rows[:-3], rows[-3:]
    assert {r["op"] for r in good} == {"reduce", "broadcast", "reduce_scatter", "allgather", "allreduce"}
    assert all(r["num_wrong"] == 0 for r in good), [r for r in good if r["num_wrong"]]
    assert [r["root"] for r in good if r["op"] in ("reduce", "broadcast")] == [2] * 12
    factors = {"reduce": 1, "broadcast": 1, "reduce_scatter": 2 / 3, "allgather": 2 / 3, "allreduce": 4 / 3}
    for row in good:
        assert row["busbw_GBps"] == pytest.approx(row["algbw_GBps"] * factors[row["op"]])
    # Rank 0 copies instead of reducing: its first block misses contributions, elsewhere it spreads.
    assert all(r["num_wrong"] > 0 for r in corrupted[1:]), corrupted


def exchanges(ctx):
    """Every exchange without a schedule (alltoall; sendrecv where its factor is defined), several dtypes."""
    rows = []
    for op in NATIVE_ONLY:
        for dtype in ("float32", "bfloat16", "int64"):
            # 3 ranks: 1000 B of float32 is 250 elements, rounded down to 3 blocks of 83 for alltoall.
            rows += bench_rank(ctx, BenchConfig(algos=("native",), op=op, dtype=dtype, **SMALL))
    return rows


def test_alltoall_is_timed_natively_checked_and_its_size_rounded_to_whole_blocks():
    rows = spawn(exchanges, config=LaunchConfig(num_ranks=3, timeout_s=30))[0]
    assert {r["op"] for r in rows} == set(NATIVE_ONLY) and "alltoall" in NATIVE_ONLY
    assert all(r["num_wrong"] == 0 and r["algo"] == "native" and r["redop"] == "none" for r in rows), rows
    alltoall = [r for r in rows if r["op"] == "alltoall" and r["dtype"] == "float32"]
    assert [(r["size_bytes"], r["count"]) for r in alltoall] == [(0, 0), (996, 249), (65532, 16383)]
    for row in rows:
        assert row["busbw_GBps"] == pytest.approx(row["algbw_GBps"] * bus_bandwidth_factor(row["op"], 3))
        assert row["time_us_min"] <= row["time_us_median"] and row["time_us_min"] <= row["time_us"]


@pytest.mark.parametrize("op", NATIVE_ONLY)
@pytest.mark.parametrize("num_ranks, count", [(1, 5), (2, 8), (3, 250), (5, 4099 * 5)])
def test_exchange_inputs_expect_what_the_exchange_delivers_and_catch_a_misplaced_block(op, num_ranks, count):
    import torch

    def tile(period, start, length):
        reps = -(-length // len(period)) + 1
        return period.roll(-(start % len(period))).repeat(reps)[:length]

    values = torch.stack([(torch.arange(4099) * 7 % 4 + r) % 4 for r in range(num_ranks)]).float()
    count = exchange_count(op, count, num_ranks)
    pairs = [exchange_inputs(op, count, num_ranks, r, tile, values) for r in range(num_ranks)]
    delivered = reference_exchange(op, [init for init, _ in pairs])
    assert all(torch.equal(got, want) for got, (_, want) in zip(delivered, pairs))
    if num_ranks > 1:  # rank 0 gets rank 1's data where rank 2's (or its own) belongs: caught
        wrong = reference_exchange(op, [pairs[1][0]] + [init for init, _ in pairs[1:]])
        assert not all(torch.equal(got, want) for got, (_, want) in zip(wrong, pairs))


@pytest.mark.parametrize("change, fragment", [
    (dict(op="scatter"), "unknown collective 'scatter'"),
    (dict(op="alltoall"), "alltoall runs only as the backend's own collective"),
    (dict(op="alltoall", algos=("native", "ring")), "no alltoall schedule such as 'ring': use --algo native"),
    (dict(dtype="float8"), "unknown dtype 'float8'"),
    (dict(redop="prod"), "unknown reduce op 'prod'"),
    (dict(num_ranks=0), "number of ranks must be >= 1"),
    (dict(root=4), "root 4 is out of range for 4 ranks"),
    (dict(iters=0), "iters >= 1"),
    (dict(iters=30, max_iters=20), "need 1 <= iters <= max iters, got 30 and 20"),
    (dict(max_time_s=float("nan")), "max time nan: give a finite number of seconds"),
    (dict(confidence=1.0), "confidence 1.0: give a probability from 0.5 to 0.999"),
    (dict(sizes_bytes=()), "non-empty"),
    (dict(algos=("ring", "native", "ring")), "listed twice"),
    (dict(algos=("ring", "nosuch")), "unknown allreduce algorithm 'nosuch'"),
    (dict(op="reduce_scatter", algos=("butterfly",)), "unknown reduce_scatter algorithm 'butterfly'"),
])
def test_bad_config_is_a_value_error(change, fragment):
    with pytest.raises(ValueError, match=fragment):
        BenchConfig(**change)


def test_dtype_sizes_match_the_executors_torch_dtypes():
    import torch

    from fabriclab.runtime.executor import DTYPES

    assert {name: torch.empty(0, dtype=dtype).element_size() for name, dtype in DTYPES.items()} == DTYPE_SIZES


@pytest.mark.parametrize("change, fragment", [
    (dict(dtype="int32", sizes_bytes=(6,)), "size 6B is not a whole number of int32 elements (4 B each)"),
    (dict(dtype="int64", sizes_bytes=(8, 12)), "size 12B is not a whole number of int64 elements"),
    (dict(num_ranks=100_000), "local ranks on this machine"),
    (dict(sizes_bytes=(1 << 40,)), "of memory, more than the"),
    (dict(timeout_s=float("nan")), "finite"),
    (dict(segment_bytes=2), "below one float32 element"),
    (dict(algos=("chain:chunks=100000",)), "chunks=100000 is more than the 4096"),
])
def test_limits_are_checked_before_any_rank_starts(change, fragment):
    with pytest.raises(ValueError) as info:
        BenchConfig(**change)
    assert fragment in str(info.value)
