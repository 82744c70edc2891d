"""The fatness verdicts follow the numbers: the same text logic says SUPPORTED or NOT."""

from fabriclab.bench.fatness import BISECTIONS, METHODS
from fabriclab.report.fatness import plot_figures, summary


def _rows(time_of):
    return [{"layers": lv, "hosts": h, "bisection": b, "link_GBps": bw, "latency_us": 0.2, "method": m,
             "time_s": time_of(lv, h, b, bw, m)}
            for lv, h in ((2, 2048), (3, 1024)) for b in BISECTIONS for bw in (1, 4) for m in METHODS]


def _poster_like(lv, h, b, bw, m):
    ratio = eval(b)  # "1/16" -> 0.0625; test data only
    base = {"ring": 0.54, "butterfly-near": 0.53, "butterfly-far": 0.53, "layered-butterfly": 1.5,
            "parameter-server": 6.0}[m]
    if m.startswith("butterfly"):
        base /= ratio ** 0.5
    return base * 4 / bw


def test_poster_like_numbers_support_the_posters_conclusions(tmp_path):
    text = summary(_rows(_poster_like))
    assert "1. Bisection ratio affects flat butterfly" in text and "NOT SUPPORTED" not in text.split("\n")[2]
    assert "2. Layered butterfly is flat" in text
    assert "3. Avoid the parameter server (P/8 servers): SUPPORTED" in text
    assert "4. Link speed linearly affects the exchange (3-layer, 1024 nodes): SUPPORTED" in text
    assert len(plot_figures(_rows(_poster_like), tmp_path)) == 4


def test_numbers_that_contradict_the_poster_are_reported():
    text = summary(_rows(lambda lv, h, b, bw, m: 1.0 if m != "ring" else 2.0))
    assert "3. Avoid the parameter server (P/8 servers): NOT SUPPORTED" in text
    assert "1. Bisection ratio affects flat butterfly (2-layer, 2048 nodes, 4 GB/s, 0.2 us): NOT SUPPORTED" in text
    assert "4. Link speed linearly affects the exchange (3-layer, 1024 nodes): NOT SUPPORTED" in text
