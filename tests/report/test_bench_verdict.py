"""The conclusion of a collectives benchmark (`fabriclab run`'s last lines): bands of sizes per winner with
the margin over the runner-up, the largest size's busbw, the correctness check."""

from fabriclab.report.bench_verdict import verdict


def _rows(table: dict[str, list[float]], sizes=(1024, 4096, 1 << 20, 16 << 20)) -> list[dict]:
    return [{"algo": a, "size_bytes": s, "busbw_GBps": b, "num_wrong": 0}
            for a, values in table.items() for s, b in zip(sizes, values)]


def test_small_sizes_to_one_algorithm_large_to_another_with_the_margins():
    lines = verdict(_rows({"ring": [0.01, 0.02, 1.0, 2.0], "native": [0.03, 0.05, 0.5, 1.0]}))
    assert lines[0] == "native wins 2 of 4 sizes, ring wins 2 of 4 sizes"
    assert lines[1] == "native wins at 1KB to 4KB: 2.50x to 3.00x the busbw of the next best (ring)"
    assert lines[2] == "ring wins at 1MB to 16MB: 2.00x the busbw of the next best (native)"
    assert lines[3] == "at 16MB: ring 2 GB/s, native 1 GB/s busbw" and lines[4] == "every result checked correct"


def test_a_wrong_result_never_wins_and_is_counted():
    rows = _rows({"ring": [1.0, 1.0, 1.0, 1.0], "butterfly": [9.0, 0.5, 0.5, 0.5], "native": [0.9, 0.9, 0.9, 0.9]})
    rows[4]["num_wrong"] = 3  # butterfly's 1 KB is fast but wrong
    lines = verdict(rows)
    assert lines[1].startswith("ring wins at 1KB to 16MB: 1.11x") and lines[-1] == "3 wrong elements: see #wrong"
    assert verdict(_rows({"ring": [1.0, 1.0, 1.0, 1.0]}))[0].startswith("no size was measured with two")
