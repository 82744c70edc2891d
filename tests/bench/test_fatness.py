"""The fatness sweep: points, resume without recomputing, and the CSV it writes."""

from fabriclab.bench import fatness


def test_the_grid_is_the_posters():
    points = fatness.fatness_points()
    assert len(points) == 5 * 5 * 2 * 2 * 5
    assert {p.hosts for p in points} == {128, 256, 512, 1024, 2048}
    assert {p.bisection for p in points} == {"1", "1/2", "1/4", "1/8", "1/16"}
    ps = next(p for p in points if p.method == "parameter-server" and p.hosts == 2048)
    assert ps.algo() == "parameter-server:servers=256"


def test_an_interrupted_sweep_resumes_without_recomputing(tmp_path):
    points = [p for p in fatness.fatness_points()
              if p.hosts == 128 and p.link_GBps == 4 and p.latency_us == 0.2 and p.bisection in ("1", "1/16")]
    csv_path = tmp_path / "f.csv"
    first = points[:3]
    assert len(list(fatness.run_points(first, csv_path))) == 3
    seen = []
    computed = list(fatness.run_points(points, csv_path, lambda p, done: seen.append(done)))
    assert len(computed) == len(points) - 3 and seen.count(True) == 3
    rows = fatness.load_rows(csv_path)
    assert len(rows) == len(points) and all(r["exact"] == "True" for r in rows)
    by = {(r["bisection"], r["method"]): float(r["time_s"]) for r in rows}
    # Thin up-links slow the flat butterfly down but not the ring (one flow per leaf crosses).
    assert by[("1/16", "butterfly-far")] > 3 * by[("1", "butterfly-far")]
    assert by[("1/16", "ring")] == by[("1", "ring")]
