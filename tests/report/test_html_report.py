"""The HTML report: every section draws its records, every number links to its record, nothing is fetched
from the network, figures have titles, axis labels and alt text; and a real headless Chromium renders
it with no console error and every image loaded (skipped where Chromium is not installed)."""

import base64
import re
import shutil
import struct
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cdp import CHROMIUM, Browser
from fabriclab.report import html as report_html
from fabriclab.report.html import parts as html_parts
from sample_records import as_stored, sample_records

NUMBER = re.compile(r"^[+-]?\d[\d.,e+-]*\s*(%|x| %)?$")


class Page(HTMLParser):
    """What the tests look at: images per section, links, ids, and table cells with their links."""

    def __init__(self, text: str):
        super().__init__()
        self.section = None
        self.images: list[tuple[str | None, dict]] = []
        self.hrefs: list[str] = []
        self.ids: set[str] = set()
        self.cells: list[tuple[str, list[str]]] = []  # (text, hrefs inside)
        self.tags: list[tuple[str, dict]] = []
        self._cell = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "section":
            self.section = a.get("id")
        elif tag == "img":
            self.images.append((self.section, a))
        elif tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
            if self._cell is not None:
                self._cell[1].append(a["href"])
        elif tag == "td":
            self._cell = ["", []]

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.cells.append((self._cell[0].strip(), self._cell[1]))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[0] += data


@pytest.fixture(scope="module")
def sample_build() -> tuple[list, str]:
    """Every figure the sample records' page draws, and the page: drawn once, read by several tests."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        return drawn_figures(as_stored(sample_records()), monkeypatch, store="/tmp/test.db")


@pytest.fixture(scope="module")
def page_text(sample_build) -> str:
    return sample_build[1]


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_every_section_draws_its_records_as_inline_figures(page_text):
    page = Page(page_text)
    per_section = {}
    for section, img in page.images:
        per_section[section] = per_section.get(section, 0) + 1
        assert img["src"].startswith("data:image/png;base64,")
        width, height = _png_size(base64.b64decode(img["src"].split(",", 1)[1]))
        assert (width, height) == (int(img["width"]), int(img["height"]))
        assert len(img["alt"]) > 40 and "chart" in img["alt"]
    assert set(per_section) == {s.key for s in report_html.SECTIONS}
    assert "could not be drawn" not in page_text  # every sample is shaped as its command writes it
    other = page_text.split('id="other"', 1)[1].split("</section>", 1)[0]
    assert "fabriclab bench overhead" in other  # no section for it
    assert "2048 values: min" in other and "<svg" in other  # its long list summarised, with a histogram
    assert other.count("1.0") < 50  # not one value per line
    assert "the cheapest option that reaches 0.90 is 100g-opa" in page_text
    assert "baseline model: <a" in page_text and "within the goal" in page_text


def test_every_number_links_to_its_record_and_every_record_has_its_metadata(page_text):
    page = Page(page_text)
    numbers = [(text, hrefs) for text, hrefs in page.cells if NUMBER.match(text)]
    assert len(numbers) > 300
    unlinked = [text for text, hrefs in numbers if not any(h.startswith("#rec-") for h in hrefs)]
    assert unlinked == []
    internal = [h[1:] for h in page.hrefs if h.startswith("#")]
    assert set(internal) <= page.ids  # no dangling link
    records = as_stored(sample_records())
    for s in records:
        block = page_text.split(f'id="rec-{s.id}"', 1)[1].split('class="rec"', 1)[0]
        assert s.record["host"]["hostname"] in block and s.kind in block and "fabriclab" in block
        if s.record["git"]:
            assert s.record["git"]["revision"] in block


def test_nothing_is_fetched_from_the_network(page_text):
    page = Page(page_text)
    for tag, attrs in page.tags:
        for name in ("src", "href"):
            value = attrs.get(name, "")
            assert not re.match(r"^[a-z]+://", value), (tag, value[:80])  # data:, #anchors only
        assert tag not in ("script", "iframe", "object")
        assert tag != "link" or attrs.get("href", "").startswith("data:")
    assert "@import" not in page_text and "url(" not in page_text


FIGURE_MODULES = ("sim", "train", "hpc", "collectives", "plan", "calibrate", "llm_plan", "predict")
UNIT = re.compile(r"\(.+\)|/")  # `time per step (ms)`, `busbw (GB/s)`, `images/sec`


def drawn_figures(records, monkeypatch, store: str = "x.db") -> tuple[list, str]:
    """Every matplotlib figure the report draws for `records`, with its alt text; and the page."""
    drawn = []
    original = html_parts.figure

    def keep(fig, **kwargs):
        drawn.append((fig, kwargs["alt"]))
        return original(fig, **kwargs)

    monkeypatch.setattr(html_parts, "figure", keep)
    for module in FIGURE_MODULES:
        monkeypatch.setattr(f"fabriclab.report.html.{module}.figure", keep)
    text = report_html.build_html(records, store=store)
    return drawn, text


def check_figure(fig, alt: str) -> None:
    """Readable on its own: a title, both axes labelled with their unit (or categories on y), a legend
    naming the series wherever there are two or more, and a scaling-factor axis spanning >= 0.1."""
    for ax in fig.axes:
        assert ax.get_title() or fig._suptitle is not None, alt
        assert UNIT.search(ax.get_xlabel()), (ax.get_xlabel(), alt)
        categories = any(t.get_text() for t in ax.get_yticklabels()) and not ax.get_ylabel()
        assert categories or UNIT.search(ax.get_ylabel()), (ax.get_ylabel(), alt)
        series = [a for a in ax.lines + ax.collections + ax.containers
                  if not str(a.get_label()).startswith("_")]
        # panels of one figure share the legend of one of them
        legend = ax.get_legend() or next((a.get_legend() for a in fig.axes if a.get_legend()), None)
        if len(series) >= 2:
            assert legend is not None and len(legend.get_texts()) >= 2, alt
        if legend is not None:
            assert all(t.get_text() for t in legend.get_texts()), alt
        if ax.get_ylabel().startswith("scaling factor"):
            low, high = ax.get_ylim()
            assert high - low >= 0.099, (ax.get_ylim(), alt)  # 0.001 differences are not magnified


def test_figures_have_titles_labelled_axes_and_legends(sample_build):
    drawn = sample_build[0]
    assert len(drawn) >= 15
    for fig, alt in drawn:
        check_figure(fig, alt)


def test_sections_without_records_collapse_into_one_line_naming_the_commands_that_fill_them():
    text = report_html.build_html([], store="empty.db")
    assert "<img" not in text and text.count("<h2>") == 3  # summary, not run yet, records
    empty = Page(text.split('id="empty"', 1)[1].split("</section>", 1)[0])
    line = text.split('id="empty"', 1)[1].split("</section>", 1)[0]
    assert line.count("<p") == 1 and not empty.cells
    for section in report_html.SECTIONS:
        assert f"{html_parts.esc(section.title)} (<code>{html_parts.esc(section.fill)}</code>)" in line
    some = report_html.build_html(as_stored(sample_records()[-4:]), store="x.db")  # LLM plan, predictions
    assert '<section id="llm-plan">' in some and '<section id="fatness">' not in some
    assert "Fat-tree fatness" in some.split('id="empty"', 1)[1].split("</section>", 1)[0]


def test_a_record_of_an_unexpected_shape_is_noted_with_its_numbers():
    bad = sample_records()[1]
    bad["results"] = [{"model": "resnet50", "workers": 4, "scaling_factor": 0.5}]  # no algo, no bandwidth
    text = report_html.build_html(as_stored([bad]), store="x.db")
    assert "Record 1 could not be drawn (KeyError" in text and ">0.5</a>" in text


def test_only_the_newest_sweep_is_drawn_and_the_older_one_is_linked():
    records = sample_records()
    sweeps = as_stored([records[0], records[0]])
    text = report_html.build_html(sweeps, store="x.db")
    fatness = text.split('id="fatness"', 1)[1].split("</section>", 1)[0]
    alone = report_html.build_html(sweeps[1:], store="x.db")
    assert fatness.count("<img") == alone.count("<img") > 0  # the older record adds no figure
    assert "Not drawn: earlier records of this section" in fatness and 'href="#rec-1"' in fatness
    assert 'href="#rec-2"' in fatness.split("Not drawn")[0]


# -- in a real browser -------------------------------------------------------------------------------

needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None and not Path(CHROMIUM).exists(),
                                    reason="headless Chromium not installed (Debian: apt-get install chromium)")

CHECK = """JSON.stringify([...document.images].map(i => ({complete: i.complete, width: i.naturalWidth,
                                                      alt: i.alt})))"""


@needs_chromium
def test_chromium_renders_the_report_with_no_error_and_every_image(tmp_path):
    out = tmp_path / "site"
    page = report_html.write_report(out, as_stored(sample_records()), store="test.db")
    expected = page.read_text().count("<img ")
    with Browser(timeout_s=60) as browser:
        browser.open(page.as_uri())
        import json

        images = json.loads(browser.evaluate(CHECK))
        shot = browser.screenshot(tmp_path / "report.png", full_page=True)
        problems, requests = browser.problems(), browser.requests()
    assert problems == []
    assert len(images) == expected >= 12
    assert [i for i in images if not i["complete"] or i["width"] == 0] == []
    assert [u for u in requests if not u.startswith("data:") and u != page.as_uri()] == []
    assert _png_size(shot.read_bytes())[1] > 2000 and shot.stat().st_size > 50_000


@needs_chromium
def test_the_browser_check_catches_a_missing_image_and_a_console_error(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body>'
                    '<img src="missing.png" alt="gone"><script>console.error("boom")</script></body></html>')
    with Browser(timeout_s=60) as browser:
        browser.open(page.as_uri())
        import json

        images = json.loads(browser.evaluate(CHECK))
        problems = browser.problems()
    assert images == [{"complete": True, "width": 0, "alt": "gone"}]
    assert any("boom" in p for p in problems) and any("missing.png" in p or "ERR_FILE_NOT_FOUND" in p
                                                     for p in problems)


# -- a realistic store: the export of tests/report/build_store.sh (real runs of the commands) ----------

REALISTIC = Path(__file__).resolve().parent / "data" / "realistic_records.json.gz"
# Bounds that keep the page readable: the whole page and any one section, in CSS pixels at 1280 wide.
MAX_PAGE_PX = 17000  # 14,420 px before the two LLM sections (about 1,700 px with two whatif llm records)
MAX_SECTION_PX = 3000


def realistic_records():
    import gzip
    import json

    from fabriclab.report.store_views import Stored

    exported = json.loads(gzip.decompress(REALISTIC.read_bytes()))
    return [Stored(id=r.pop("id"), nulled_keys=tuple(r.pop("nulled_keys", ())), record=r) for r in exported]


def test_the_realistic_store_is_real_runs_of_every_drawn_kind():
    kinds = {s.kind for s in realistic_records()}
    assert {"calibrate.nccl-tests", "plan", "whatif", "whatif.reproduce", "validate.published", "simulate.sweep",
            "stencil.simulate", "collectives.bench", "train.bench", "bench.train", "whatif.llm"} <= kinds
    assert len(realistic_records()) >= 18


@pytest.fixture(scope="module")
def realistic_build() -> tuple[list, str]:
    """The realistic store's figures and page, drawn once (two tests read them)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        return drawn_figures(realistic_records(), monkeypatch, store="realistic.db")


def test_realistic_figures_are_readable_on_their_own(realistic_build):
    drawn = realistic_build[0]
    assert len(drawn) >= 14
    for fig, alt in drawn:
        check_figure(fig, alt)


SECTIONS_JS = """JSON.stringify({
  height: document.documentElement.scrollHeight,
  sections: [...document.querySelectorAll('body > section')].map(s => ({
    id: s.id, title: (s.querySelector('h2') || {}).textContent || '',
    height: Math.round(s.getBoundingClientRect().height),
    empty: !!s.querySelector('p.empty'),
    figures: [...s.querySelectorAll('figure')].map(f => ({
      loaded: [...f.querySelectorAll('img')].every(i => i.complete && i.naturalWidth > 0),
      caption: (f.querySelector('figcaption') || {}).textContent || '',
      alt: (f.querySelector('img') || {}).alt || ''})),
    tables: s.querySelectorAll('table').length,
    headless: [...s.querySelectorAll('table')].filter(t => !t.querySelector('thead th')).length,
    cells: [...s.querySelectorAll('td')].filter(td => td.textContent.trim() === '').length,
    widest: Math.max(0, ...[...s.querySelectorAll('figure, .tbl, table')].map(e => e.getBoundingClientRect().right)),
  })),
  nav: [...document.querySelectorAll('nav a')].map(a => a.getAttribute('href')),
})"""


@needs_chromium
def test_chromium_every_section_of_a_realistic_report(tmp_path):
    import json

    records = realistic_records()
    page = report_html.write_report(tmp_path / "site", records, store="realistic.db")
    with Browser(timeout_s=90) as browser:
        browser.open(page.as_uri())
        seen = json.loads(browser.evaluate(SECTIONS_JS))
        problems = browser.problems()
    assert problems == []
    sections = {s["id"]: s for s in seen["sections"]}
    assert seen["sections"][0]["id"] == "summary"
    assert [f"#{k}" for k in sections] == seen["nav"]  # every section is in the table of contents, in order
    assert seen["height"] <= MAX_PAGE_PX, seen["height"]
    drawn = [s for s in seen["sections"] if s["id"] not in ("summary", "records", "other") and not s["empty"]]
    assert {s["id"] for s in drawn} >= {"plan", "llm", "calibrate", "main-job", "fatness", "whatif", "throughput",
                                          "scaffe", "stencil", "published"}
    for s in seen["sections"]:
        assert s["title"] and s["height"] <= MAX_SECTION_PX, (s["id"], s["height"])
        assert s["widest"] <= 1280, (s["id"], s["widest"])  # nothing runs off the page
        assert s["headless"] == 0 and s["cells"] == 0, s["id"]  # every table has headers, every cell a value
    for s in drawn:
        assert s["figures"], s["id"]  # each question answered by a figure first
        for f in s["figures"]:
            assert f["loaded"] and "record" in f["caption"] and len(f["alt"]) > 40, (s["id"], f)
    text = page.read_text()
    summary = text.split('id="summary"', 1)[1].split("</section>", 1)[0]
    assert "Measured" in summary and "Predicted" in summary and "Recommendation" in summary
    assert "Worst errors" in summary and "not predicted" in summary


def test_the_summary_and_the_published_counts_say_what_the_commands_say(realistic_build):
    text = realistic_build[1]
    assert "could not be drawn" not in text  # every real record is drawn as its command writes it
    summary = text.split('id="summary"', 1)[1].split("</section>", 1)[0]
    assert "<b>Measured</b>: 2 <code>calibrate.nccl-tests</code>" in summary
    predicted = summary.split("<b>Predicted</b>: ", 1)[1].split("</li>", 1)[0]
    for count in ("3 <code>plan</code>", "1 <code>simulate.cluster</code>", "2 <code>whatif.llm</code>"):
        assert count in predicted, count  # every prediction kind counted
    assert summary.index("Recommendation") < summary.index("Measured")  # the answer first
    assert "the cheapest option that reaches 0.90 is 25GbE" in summary  # the newest plan's recommendation
    assert "26 of 33 predicted rows within the goal, 2 not predicted; worst: awan-cc8-speedup +104.6 %" in summary
    assert "largest busbw errors 2 GPUs 16-512 KB" in summary
    published = text.split('id="published"', 1)[1].split("</section>", 1)[0]
    words = re.sub(r"<[^>]+>", "", published)
    # `validate published` prints: before (baseline): 0 of 21 rows ..., 14 not predicted; after: 26 of 33, 2
    assert "baseline model: 0 of 21 within the goal, 14 not predicted" in words
    assert "with mechanisms: 26 of 33 within the goal, 2 not predicted" in words
