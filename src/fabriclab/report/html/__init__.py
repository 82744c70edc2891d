"""The HTML report: one self-contained page built only from records in the results store.

`write_report(out_dir, store)` writes `out_dir/index.html`: sections in the order of the question (plan
first, then the papers' studies), each drawing the records of its kinds with figures (inline PNG, titled,
axes labelled with units, alt text) beside tables whose every number links to its record; at the bottom,
each record's command, time, git revision, host and config. The sections without records are collapsed
into one line that names the command filling each. No script, no font or image from the network: the page opens offline.

Try it: `fabriclab report --out report/ && xdg-open report/index.html`.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import fabriclab
from fabriclab.report.html import (calibrate, collectives, hpc, llm, llm_plan, plan, predict, sim, train,
                                   validate_llm, validate_nccl)
from fabriclab.report.html.parts import Section, anchor, esc, rows_table, source
from fabriclab.report.html.summary import summary
from fabriclab.report.store_views import Stored, command_of

_BY_KEY = {s.key: s for s in sim.SECTIONS + train.SECTIONS + hpc.SECTIONS + plan.SECTIONS + collectives.SECTIONS
           + calibrate.SECTIONS + llm.SECTIONS + llm_plan.SECTIONS + predict.SECTIONS + validate_llm.SECTIONS
           + validate_nccl.SECTIONS}
# Reading order: the answers first (what to buy for an LLM, then for a CNN), the steps and collectives they
# rest on, the cluster fitted, then the studies as the papers present them, then the checks.
ORDER = ("llm-plan", "plan", "llm", "predictions", "calibrate", "main-job", "fatness", "whatif", "throughput",
         "scaffe", "stencil", "validate", "llm-check", "collectives-check", "nccl-corpus", "published")
SECTIONS: tuple[Section, ...] = tuple(_BY_KEY[k] for k in ORDER)

CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1250px;padding:0 1.2em 3em;color:#1b1b1b}
h1{margin-top:.8em}h2{border-bottom:2px solid #ccd;padding-bottom:.2em;margin-top:2em}
nav ol{columns:2}code{background:#f3f3f6;padding:0 .25em;border-radius:3px}
.pair{display:flex;flex-wrap:wrap;gap:1.2em;align-items:flex-start;margin:1em 0}
figure{margin:0;max-width:100%;display:table}figure img{max-width:100%;height:auto;border:1px solid #dde}
figcaption{font-size:12px;color:#444;display:table-caption;caption-side:bottom}
.tbl{overflow-x:auto;max-width:100%;flex:0 1 auto}
table{border-collapse:collapse;font-size:12.5px;font-variant-numeric:tabular-nums}
caption{caption-side:top;text-align:left;font-size:12px;color:#444;padding-bottom:.3em}
th,td{border-bottom:1px solid #e3e3ea;padding:.15em .5em;text-align:left;max-width:26em}
td.num{text-align:right;white-space:nowrap}th{background:#f3f3f6;white-space:nowrap}a.n{color:inherit;text-decoration:none;border-bottom:1px dotted #99a}
a.bad{color:#b00020}a.ok{color:#106010}.empty{color:#666;font-style:italic}
.note{color:#8a5a00}.answer{font-size:1.1em;background:#eef6ee;padding:.5em .8em;border-left:4px solid #3a3}
.rec{border-top:1px solid #dde;padding:.2em 0}.rec summary,details.tbl>summary{cursor:pointer;color:#224}
details.tbl{margin:.5em 0}details.rec:target{background:#fff8dc}.summary li{margin:.2em 0}svg.hist{vertical-align:middle;fill:#6a7fb0;margin-left:.4em}
.rec dl{display:grid;grid-template-columns:max-content auto;
gap:.1em 1em;margin:.3em 0;font-size:13px}.rec dt{color:#555}.rec dd{margin:0}
pre{font-size:11px;background:#f7f7f9;padding:.5em;overflow-x:auto;max-height:24em}
"""


def assign(records: list[Stored]) -> tuple[dict[str, list[Stored]], list[Stored]]:
    """Records per section key (newest first) and the records no section draws. Exact kinds win over
    wildcards (`validate.published` goes to its own section, not to `validate*`)."""
    per: dict[str, list[Stored]] = {s.key: [] for s in SECTIONS}
    other = []
    for stored in sorted(records, key=lambda s: -s.id):
        exact = [s for s in SECTIONS if stored.kind in s.kinds]
        wild = [s for s in SECTIONS if s.takes(stored.kind)]
        chosen = (exact or wild or [None])[0]
        (per[chosen.key] if chosen else other).append(stored)
    return per, other


def _newest(section: Section, records: list[Stored]) -> tuple[list[Stored], list[Stored]]:
    """The records a section draws (the newest `keep` of each kind, or of each distinct configuration where
    the section tells them apart; pooled kinds all) and the rest."""
    drawn, older, seen, configs = [], [], {}, set()
    for s in records:  # newest first
        if section.distinct is not None:
            key = (s.kind, section.distinct(s))
            fresh = key not in configs
            configs.add(key)
            if fresh:
                seen[s.kind] = seen.get(s.kind, 0) + 1
            (drawn if fresh and seen[s.kind] <= section.keep else older).append(s)
            continue
        seen[s.kind] = seen.get(s.kind, 0) + 1
        (drawn if s.kind in section.pooled or seen[s.kind] <= section.keep else older).append(s)
    return drawn, older


def build_html(records: list[Stored], *, store: Path | str, now: datetime.datetime | None = None) -> str:
    """The whole page for `records`."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    per, other = assign(records)
    body, toc = [], ['<li><a href="#summary">Summary</a></li>']
    for section in SECTIONS:
        mine = per[section.key]
        if not mine:
            continue
        toc.append(f'<li><a href="#{section.key}">{esc(section.title)}</a> ({len(mine)})</li>')
        body.append(f'<section id="{section.key}"><h2>{esc(section.title)}</h2><p>{section.intro}</p>')
        drawn, older = _newest(section, mine)
        body.append(section.render(drawn))
        if older:
            what = "repeats of a run drawn above or earlier records" if section.distinct else "earlier records"
            body.append(f"<p>Not drawn: {what} of this section (<code>fabriclab report --ids ID</code> draws "
                        "one): " + "; ".join(source(s) for s in older) + ".</p>")
        body.append("</section>")
    empty = [s for s in SECTIONS if not per[s.key]]
    if empty:
        toc.append('<li><a href="#empty">Not run yet</a></li>')
        body.append(not_run_yet(empty))
    if other:
        toc.append(f'<li><a href="#other">Other runs</a> ({len(other)})</li>')
        body.append('<section id="other"><h2>Other runs</h2><p>Records no section above draws, with their '
                    "numbers (open one to read it).</p>")
        body += [f'<details class="rec"><summary>Record {s.id}: <code>{esc(command_of(s.record))}</code></summary>'
                 f"{rows_table(s, limit=20)}</details>" for s in other]
        body.append("</section>")
    toc.append(f'<li><a href="#records">Records</a> ({len(records)})</li>')
    body.append(_records(records))
    title = "fabriclab report"
    stamp = now.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="icon" href="data:,"><title>{title}</title><style>{CSS}</style></head><body>'
            f"<h1>{title}</h1><p>{len(records)} records from the results store <code>{esc(store)}</code>, "
            f"written {stamp} by fabriclab {esc(fabriclab.__version__)}. Every number links to the record it "
            f"comes from (command, time, git revision, host) at the bottom of the page.</p>"
            f"<nav><ol>{''.join(toc)}</ol></nav>{summary(records)}{''.join(body)}</body></html>\n")


def not_run_yet(sections: list[Section]) -> str:
    """The sections without records, collapsed into one line: each title with the command that fills it."""
    items = "; ".join(f"{esc(s.title)} (<code>{esc(s.fill)}</code>)" for s in sections)
    return (f'<section id="empty"><h2>Not run yet</h2><p class="empty">No records yet for: {items}. Run one, then '
            f"<code>fabriclab report</code> again.</p></section>")


def _records(records: list[Stored]) -> str:
    items = []
    for s in sorted(records, key=lambda s: s.id):
        r = s.record
        git, host = r.get("git") or {}, r.get("host") or {}
        facts = {
            "command": f"<code>{esc(command_of(r))}</code>",
            "time": esc(s.created_utc),
            "git revision": esc(git.get("revision") or "unknown") + (" (with local changes)" if git.get("dirty") else ""),
            "host": esc(f"{host.get('hostname', '?')}: {host.get('cpu_model') or '?'}, {host.get('num_cpus', '?')} "
                        f"CPUs, {_gib(host.get('memory_bytes'))}, {host.get('os', '?')}"),
            "versions": esc(", ".join(f"{k} {v}" for k, v in (r.get("versions") or {}).items())),
            "show": f"<code>fabriclab results show {s.id}</code>",
        }
        if s.nulled_keys:
            facts["stored as null"] = esc(", ".join(s.nulled_keys) + " (not finite numbers)")
        dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts.items())
        config = esc(json.dumps(r.get("config"), indent=1))
        items.append(f'<details class="rec" id="{anchor(s)}"><summary>Record {s.id}: {esc(s.kind)}, '
                     f'<code>{esc(command_of(r))}</code>, {esc(s.created_utc[:16].replace("T", " "))}, git '
                     f'{esc((git.get("revision") or "unknown")[:10])}</summary><dl>{dl}</dl>'
                     f"<details><summary>config</summary><pre>{config}</pre></details></details>")
    return ('<section id="records"><h2>Records</h2><p>Where every number comes from: a number\'s link leads '
            f'to its record here; open it for the host, versions and config.</p>{"".join(items)}</section>')


def _gib(value) -> str:
    return f"{value / 2**30:.0f} GiB" if isinstance(value, (int, float)) else "? GiB"


def write_report(out_dir: Path, records: list[Stored], *, store: Path | str) -> Path:
    """Write `out_dir/index.html` (folders are created); returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "index.html"
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(build_html(records, store=store), encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a page
    return path
