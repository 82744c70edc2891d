"""The conclusion of a collectives benchmark (`fabriclab run`'s last lines): per size a winner with its
margin or "within noise" with the spread, the sizes of each, the record's verdicts; wrong results and
rows without an interval never win."""

from fabriclab.report.bench_verdict import describe, percent, size_verdicts, verdict, verdict_records


def _row(algo: str, size: int, median: float, half: float, iters: int = 40, **extra) -> dict:
    """A row as `collectives bench` writes it: median time, its interval (+-half), 95 % coverage."""
    return {"algo": algo, "size_bytes": size, "time_us_median": median, "time_us_ci_low": median - half,
            "time_us_ci_high": median + half, "time_ci_coverage": 0.96, "iters": iters, "stop": "clear",
            "busbw_GBps": size / median / 1e3, "num_wrong": 0} | extra


def _rows() -> list[dict]:
    # 1 KB and 4 KB: native clearly first; 1 MB: ring and native overlap; 16 MB: ring clearly first
    return [_row("ring", 1024, 300, 10), _row("native", 1024, 100, 10),
            _row("ring", 4096, 320, 10), _row("native", 4096, 120, 10),
            _row("ring", 1 << 20, 1000, 100, iters=200, stop="time cap"),
            _row("native", 1 << 20, 1050, 100, iters=200, stop="time cap"),
            _row("ring", 16 << 20, 5000, 100), _row("native", 16 << 20, 10000, 200)]


def test_each_size_has_a_winner_with_its_margin_or_is_within_noise_with_the_spread():
    lines = verdict(_rows())
    assert lines[:2] == ["a winner at 3 of 4 sizes, 1 within noise",
                         "by median time and its 95% interval; n: iterations each"]
    assert lines[2] == " 1KB  n=40   native wins by 3.00x over ring (>= 2.64x beyond noise)"
    assert lines[4] == " 1MB  n=200  within noise (spread +-10%): ring, native; gap 5%"
    assert lines[5] == "16MB  n=40   ring wins by 2.00x over native (>= 1.92x beyond noise)"
    assert lines[6:9] == ["native wins at 1KB to 4KB", "ring wins at 16MB", "within noise at 1MB"]
    assert lines[-2].startswith("at 16MB: ring ") and lines[-1] == "every result checked correct"
    assert all(len("  " + line) <= 80 for line in lines)


def test_a_wrong_result_never_wins_and_is_counted():
    rows = _rows()
    rows[1]["num_wrong"] = 3  # native's 1 KB is fast but wrong
    lines = verdict(rows)
    assert lines[2] == " 1KB  n=40   ring alone: nothing to compare" and lines[-1] == "3 wrong elements: see #wrong"


def test_rows_without_an_interval_name_no_winner_and_one_algorithm_compares_nothing():
    old = [{"algo": a, "size_bytes": 1024, "busbw_GBps": b, "num_wrong": 0} for a, b in (("ring", 1.0), ("native", 2.0))]
    assert size_verdicts(old) == [(1024, None)]
    assert describe(None) == "no interval recorded: no winner named"
    assert verdict(old)[0].startswith("no size was measured with two")
    assert verdict([_row("ring", 1024, 300, 10)])[0].startswith("no size was measured with two")


def test_the_record_keeps_each_sizes_verdict_margin_spread_iterations_and_stop():
    records = verdict_records(_rows())
    assert [r["size_bytes"] for r in records] == [1024, 4096, 1 << 20, 16 << 20]
    first, noisy = records[0], records[2]
    assert (first["winner"], first["ranked"], first["iters"], first["confidence"]) == ("native", ["native", "ring"],
                                                                                      40, 0.95)
    assert abs(first["margin"] - 3.0) < 1e-9 and first["verdict"].startswith("native wins by 3.00x")
    assert (noisy["winner"], noisy["tied"], noisy["stop"], noisy["iters"]) == (None, ["ring", "native"], "time cap",
                                                                               200)
    assert abs(noisy["spread"] - 0.1) < 1e-9 and noisy["verdict"].startswith("within noise (spread +-10%)")


def test_percentages_keep_two_digits_and_are_never_cut_to_zero():
    assert [percent(x) for x in (0.0041, 0.041, 0.12, 1.5)] == ["0.41%", "4.1%", "12%", "150%"]
