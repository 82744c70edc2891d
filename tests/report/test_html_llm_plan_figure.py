"""The LLM plan's figure (`report/html/llm_plan.plan_figure`, drawn with Agg): tick labels are distinct however
close the values, and options at one point (a network variation that changes neither the price nor the step
much) are spread around it and labelled, so every option can be seen."""

from fabriclab.report.html.llm_plan import plan_figure


def _rows() -> list[dict]:
    """12 options in 4 points: 3 bisections of each cluster cost and train the same, within 0.1 %."""
    rows = []
    for c, (usd, tokens) in enumerate([(383.4e6, 1_236_100), (549.9e6, 1_236_500), (420.0e6, 1_236_300),
                                       (610.0e6, 1_236_800)]):
        for b, bisection in enumerate(("1", "1/2", "1/4")):
            rows.append({"option": f"cluster{c} rail {bisection}", "gpus": 8192, "cluster_usd": usd * (1 + b * 1e-4),
                         "tokens_per_s": tokens + b, "pareto": b == 0})
    return rows


def _drawn(fig):
    fig.canvas.draw()
    return fig.axes[0]


def test_tick_labels_are_distinct():
    ax = _drawn(plan_figure(_rows(), "llama3-405b"))
    for labels in (ax.get_yticklabels(), ax.get_xticklabels()):
        texts = [t.get_text() for t in labels if t.get_text()]
        assert len(texts) >= 3 and len(set(texts)) == len(texts), texts
    assert any(t.get_text().startswith("1.236") for t in ax.get_yticklabels())  # M tokens/s, not a 1e6 offset


def test_every_option_is_seen_where_several_share_a_point():
    rows = _rows()
    ax = _drawn(plan_figure(rows, "llama3-405b"))
    places = set()
    for collection in ax.collections:  # one marker per option, each where its own transform puts it
        for x, y in collection.get_offset_transform().transform(collection.get_offsets()):
            places.add((round(x), round(y)))
    assert len(places) == len(rows)
    notes = {t.get_text() for t in ax.texts}
    assert notes == {f"3 options: #{3 * c + 1}, #{3 * c + 2}, #{3 * c + 3}" for c in range(4)}
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {r["option"] for r in rows}


def test_a_lone_option_is_drawn_where_it_is_and_unlabelled():
    rows = [{"option": "a", "gpus": 64, "cluster_usd": 3e6, "tokens_per_s": 1.7e6, "pareto": True},
            {"option": "b", "gpus": 64, "cluster_usd": 5e6, "tokens_per_s": 1.5e6, "pareto": False}]
    ax = _drawn(plan_figure(rows, "llama3-8b"))
    assert not ax.texts
    drawn = [tuple(c.get_offsets()[0]) for c in ax.collections]
    assert drawn == [(3e6, 1.7e6), (5e6, 1.5e6)]
