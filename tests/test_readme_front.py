"""The README is the front door: short, the two set-up commands first, one line per page in docs/ that
resolves, and the references. The long sections live in docs/ (one page each)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

INSTALL = "pip install torch==2.13.0 -e . && fabriclab run"
TEST = ("(apt-get install -y -q chromium libsimgrid-dev g++ pkg-config libprotobuf32 || (apt-get update -q && "
        "apt-get install -y -q chromium libsimgrid-dev g++ pkg-config libprotobuf32)) >/dev/null 2>&1; "
        "pip install torch==2.13.0 -e '.[test]' && python -m pytest -q")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _links(path: Path) -> list[str]:
    """Relative link targets of a markdown file, outside code blocks, without their #anchor."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return [t.split("#")[0] for t in LINK.findall(text) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_the_readme_is_under_400_lines():
    assert len(README.read_text().splitlines()) < 400


def test_it_opens_with_the_title_and_the_two_setup_commands():
    text = README.read_text()
    lines = text.splitlines()
    assert lines[0] == "# fabriclab" and lines[1] == "" and lines[2] == "```"
    block = text.split("```", 2)[1].strip().splitlines()
    assert block == [INSTALL, TEST]


def test_every_link_resolves():
    pages = [README, *sorted(DOCS.glob("*.md"))]
    for page in pages:
        for target in _links(page):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links {target}, which does not exist"


def test_the_readme_links_every_page_in_docs():
    linked = {(README.parent / t).resolve() for t in _links(README)}
    for page in sorted(DOCS.glob("*.md")):
        assert page.resolve() in linked, f"README has no line for docs/{page.name}"


def test_the_references_stay_in_the_readme():
    text = README.read_text()
    assert "\n## References\n" in text
    refs = text[text.index("\n## References\n"):]
    for cited in ("Samsi et al.", "Zhang, Li, Tanimura, Nakada", "Awan et al., S-Caffe", "Is Network the",
                  "Sinha et al.", "Korthikanti et al."):
        assert cited in refs, cited
