"""Report section: collectives fitted on a small emulated cluster and predicted on a larger one.

Records of kind `validate.collectives` (`fabriclab validate collectives`): per op, busbw against size
measured on the larger cluster beside the prediction of the model fitted on the smaller one (a figure),
the rows of the larger cluster with the error (a table), and the largest error per op and size band.

Try it: `sudo fabriclab validate collectives --ops allgather,alltoall && fabriclab report --out report/`.
"""

from __future__ import annotations

from fabriclab.report.html.parts import (Section, each, esc, figure, new_figure, num, pct, series_style, source,
                                         table)
from fabriclab.report.store_views import Stored
from fabriclab.report.validate_collectives import KIND

_NAN = float("nan")


def _one(stored: Stored) -> str:
    results = stored.record["results"]
    rows = results["rows"]
    check = [r for r in rows if r["role"] == "check"]
    hosts = check[0]["num_hosts"]
    fitted = sorted({r["num_hosts"] for r in rows if r["role"] == "fit"})
    ops = list(dict.fromkeys(r["op"] for r in check))
    fig, ax = new_figure(6.5, 4.0)
    for i, op in enumerate(ops):
        mine = sorted((r for r in check if r["op"] == op), key=lambda r: r["size_bytes"])
        style = series_style(i)
        sizes = [r["size_bytes"] for r in mine]
        ax.plot(sizes, [r["measured_busbw_GBps"] for r in mine], ls="-", label=f"{op}, measured", **style)
        if any(r["predicted_busbw_GBps"] is not None for r in mine):
            ax.plot(sizes, [_NAN if r["predicted_busbw_GBps"] is None else r["predicted_busbw_GBps"] for r in mine],
                    ls=":", marker="x", color=style["color"], label=f"{op}, predicted")
    ax.set_xscale("log")
    ax.set(xlabel="message size (bytes, log scale)", ylabel="busbw (GB/s)",
           title=f"{hosts} emulated hosts: measured vs predicted by the fit on {', '.join(map(str, fitted))} hosts")
    ax.title.set_fontsize(9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    alt = (f"Line chart: bus bandwidth against message size on {hosts} emulated hosts for {', '.join(ops)}, "
           f"measured (solid) and predicted by the model fitted on {', '.join(map(str, fitted))} hosts (dotted).")
    body = [[esc(r["op"]), num(r["size_bytes"], stored), num(r["measured_us"] / 1e3, stored),
             num(None if r["predicted_us"] is None else r["predicted_us"] / 1e3, stored),
             num(r["measured_busbw_GBps"], stored), num(r["predicted_busbw_GBps"], stored), pct(r["error_pct"], stored)]
            for r in check]
    bands = [[esc(s["op"]), esc(s["band"]), num(s["rows"], stored), num(s["max_abs_error_pct"], stored, 3, " %"),
              num(s["mean_abs_error_pct"], stored, 3, " %")] for s in results["summary"]]
    refused = "".join(f'<p class="note">Not predicted: {esc("+".join(f["ops"]))} ({esc(f["error"])}).</p>'
                      for f in results["fits"] if f["parameters"] is None)
    return ('<div class="pair">' + figure(fig, alt=alt, caption=f"Measured and predicted by fabriclab: "
                                                                f"{source(stored)}; fit: {esc(results['fit_mode'])}")
            + table(["op", "bytes", "measured ms", "predicted ms", "measured GB/s", "predicted GB/s", "error"], body,
                    caption=f"{hosts} hosts, never fitted; error = predicted busbw / measured - 1")
            + table(["op", "band", "rows", "max |error|", "mean |error|"], bands, caption="per op and size band")
            + "</div>" + refused)


render = each(_one)

SECTIONS = (
    Section(key="collectives-check", title="Collectives predicted on more hosts", kinds=(KIND,),
            fill="sudo fabriclab validate collectives --ops allgather,alltoall --hosts 4 --calibrate-hosts 2",
            intro="Does a cluster model fitted on a small cluster predict a larger one? All-gather and all-to-all "
                  "(Gloo's own) are measured on emulated stars of 2 and 4 hosts; the model is fitted to the "
                  "2-host tables only (as <code>fabriclab calibrate nccl-tests</code> fits) and predicts the "
                  "4-host rows.",
            render=render),
)
