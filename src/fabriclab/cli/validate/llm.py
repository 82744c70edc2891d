"""`fabriclab validate emulated --workload llm`: a transformer's real TP x PP x DP (x EP) step in the emulated
cluster against `whatif llm`'s prediction (`bench/validate/llm.py`), one row per part of the step with the
error and the goal (step within 15 %, each communicator within 25 % where it is above 10 % of the step).

Try it: `sudo fabriclab validate emulated --workload llm --hosts 4 --gpus-per-server 1 --tp 1
--pp 2 --gbs 4 --model gpt-mini --link 50Mbps`.
"""

from __future__ import annotations

from dataclasses import asdict

from rich import box
from rich.table import Table

from fabriclab.cli.common import EXIT_FAILED, Output, print_error, write_trace_file
from fabriclab.cli.options import parse_count, parse_nice

DEFAULT_LINK = "200Mbps"


def build_config(o: dict):
    from fabriclab.bench.validate.llm import LlmValidateConfig
    from fabriclab.units import parse_bandwidth

    counts = {k: parse_count(o[k], f"--{k.replace('_', '-')}", minimum=0 if k in ("zero", "warmup") else 1)
              for k in ("gpus_per_server", "tp", "pp", "vp", "ep", "mbs", "zero", "steps", "warmup")}
    hosts = 4 if o["hosts"] is None else parse_count(o["hosts"], "--hosts", maximum=64)
    config = LlmValidateConfig(model=o["model"], hosts=hosts, gbs=parse_count(o["gbs"] or "16", "--gbs"),
                               seq=None if o["seq"] is None else parse_count(o["seq"], "--seq"),
                               link_Bps=parse_bandwidth(o["link"] or DEFAULT_LINK), nice=parse_nice(o["nice"]),
                               **counts)
    config.par()  # a ValueError says what to change, before anything runs
    return config


def run(o: dict, output: Output) -> int:
    from fabriclab.bench.validate.llm import run_llm_validation
    from fabriclab.emu.netns import EmuError, check_system

    config = build_config(o)
    check_system()
    output.note(f"validating {config.model} {config.par().describe().rsplit(', ', 1)[0]}) on an emulated star of {config.hosts} hosts "
                f"x {config.gpus_per_server} ranks at {config.link_Bps * 8 / 1e6:g} Mbit/s: calibrating, predicting, "
                f"measuring ...")
    try:
        result = run_llm_validation(config)
    except EmuError as exc:
        print_error(exc)
        return EXIT_FAILED
    result.pop("answer")
    trace = result.pop("trace")
    code = 0
    if o["trace"] is not None:
        code = write_trace_file(o["trace"], trace, f"measured and simulated step side by side: {o['trace']} "
                                                   f"(open in ui.perfetto.dev)")
    cal = result["calibration"]
    output.table(table(result))
    output.note(f"  calibration: 1-rank step {cal['one_rank_step_s'] * 1e3:.1f} ms -> efficiency "
                f"{cal['efficiency']:.4g} of a nominal peak; Gloo through the kernel ({config.hosts * config.gpus_per_server} "
                f"ranks in pairs at once): {cal['loopback_step_s'] * 1e6:.0f} us per ring step, "
                f"{cal['loopback_Bps'] / 1e9:.2f} GB/s")
    if cal.get("link_efficiency"):
        output.note(f"  the shaped links' goodput (a host streams to the next, all at once): "
                    f"{cal['link_efficiency']:.3f} of the rate")
    output.note(f"  {'PASS' if result['passed'] else 'FAIL'}: step within 15 %, communicators above 10 % of the "
                f"step within 25 %")
    output.record("validate.llm", asdict(config), result,
                  top={"passed": result["passed"], "step_error": result["rows"][0]["error"]})
    return code


def table(result: dict) -> Table:
    t = Table(title=f"validate llm: {result['parallel']}; per step, measured (busiest rank) vs whatif llm",
              title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for h in ("part", "measured ms", "predicted ms", "share", "error", "goal"):
        t.add_column(h, justify="left" if h == "part" else "right", no_wrap=True)
    for r in result["rows"]:
        error = "-" if r["error"] is None else f"{r['error']:+.1%}"
        goal = "-" if r["goal"] is None else f"{'ok' if r['ok'] else 'MISS'} {r['goal']:.0%}"
        t.add_row(r["part"], f"{r['measured_s'] * 1e3:.2f}", f"{r['predicted_s'] * 1e3:.2f}", f"{r['share']:.1%}",
                  error, goal)
    return t


