"""Screenshot the HTML report of a results store in headless Chromium (the README's docs/report.png).

Builds the report with `fabriclab report` from a copy of the store named by its file name only, opens it,
refuses to shoot a page with a console error, an image that did not load or a path of this machine
(`/tmp/...`, `/home/...`) in the part shot, and writes a PNG of the page from a section on (default: the
first section that has a figure), `--height` pixels tall.

Run: `python tests/report/screenshot.py --store results.db --out docs/report.png --section top` (the README's
from the store `tests/report/build_store.sh` fills).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cdp import Browser  # noqa: E402

TOP_OF = """(() => { const key = %s; if (key === 'top') return 0; const all = [...document.querySelectorAll('section')];
  const s = key ? document.getElementById(key) : all.find(x => x.querySelector('img'));
  return s ? s.getBoundingClientRect().top + window.scrollY : 0; })()"""


# Text of the leaf blocks drawn between two heights of the page (the part the shot shows).
SHOWN_TEXT = """[...document.querySelectorAll('p, li, figcaption, td, th, h1, h2, summary')].filter(e => {
  const r = e.getBoundingClientRect(); const y = r.top + window.scrollY; return y + r.height > %s && y < %s; })
  .map(e => e.innerText).join('\\n')"""
MACHINE_PATH = re.compile(r"(?:/tmp/|/home/|/root/|/var/folders/|[A-Z]:\\Users)\S*")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--section", default="", help="Section id to start from, or top (default: first with a figure).")
    parser.add_argument("--height", type=int, default=1500, help="Pixels of page in the shot.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # the store by its name only, next to the page: the shot shows no path of this machine
        shutil.copyfile(args.store, Path(tmp) / args.store.name)
        subprocess.run([sys.executable, "-m", "fabriclab", "report", "--out", "site", "--store", args.store.name],
                       check=True, cwd=tmp, stdout=subprocess.DEVNULL)
        page = Path(tmp) / "site" / "index.html"
        with Browser(timeout_s=60) as browser:
            browser.open(page.as_uri())
            images = json.loads(browser.evaluate("JSON.stringify([...document.images].map(i => i.naturalWidth))"))
            problems = browser.problems()
            if problems or 0 in images:
                print(f"not shot: problems {problems}, images not loaded: {images.count(0)}", file=sys.stderr)
                return 1
            top = browser.evaluate(TOP_OF % json.dumps(args.section))
            size = browser.call("Page.getLayoutMetrics")["cssContentSize"]
            shown = browser.evaluate(SHOWN_TEXT % (top, top + args.height))
            paths = sorted(set(MACHINE_PATH.findall(shown)))
            if paths:
                print(f"not shot: machine paths in the shot: {', '.join(paths[:5])}", file=sys.stderr)
                return 1
            data = browser.call("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": top, "width": size["width"],
                         "height": min(args.height, size["height"] - top), "scale": 1}})["data"]
    import base64

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(base64.b64decode(data))
    print(f"wrote {args.out} ({len(images)} images, all loaded, no console error)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
