"""Records of every kind the report draws, shaped as the commands write them, with made-up test numbers
(smooth formulas, not measurements): for the HTML report's tests only."""

from fractions import Fraction

from fabriclab.record import make_record
from fabriclab.report.store_views import Stored

BISECTIONS = ("1", "1/2", "1/4", "1/8", "1/16")


def _fatness():
    rows = []
    for layers, hosts in ((2, 128), (3, 256)):
        for b in BISECTIONS:
            for method, base in (("ring", 0.54), ("butterfly-near", 0.53), ("parameter-server", 6.0)):
                slow = 1 / float(Fraction(b)) ** 0.5 if method != "ring" else 1.0
                rows.append({"layers": str(layers), "hosts": str(hosts), "bisection": b, "link_GBps": "4",
                             "latency_us": "0.2", "method": method, "algo": method, "time_s": str(base * slow),
                             "engine": "level", "exact": "True", "wall_s": "0.01"})
    return make_record("simulate.sweep", {"preset": "fatness", "hosts": "128,256"}, rows)


def _whatif(kind="whatif"):
    rows = [{"model": m, "device": "V100", "workers": n, "bandwidth_Gbps": bw, "compression": c, "fusion": "paper004",
             "cost": "paper004", "algo": "ring", "iteration_s": 0.13, "scaling_factor": min(1.0, bw * c / (bw * c + k * n / 16))}
            for m, k in (("resnet50", 8.0), ("vgg16", 40.0)) for bw in (1.0, 10.0, 25.0, 100.0) for n in (16, 64)
            for c in (1.0, 2.0, 5.0)]
    return make_record(kind, {"profile": "resnet50,vgg16"}, rows if kind == "whatif" else {"sweep_s": 0.02, "rows": rows})


def _fabrics():
    rows = [{"fabric": f, "workers": n, "algo": a, "dilation": 100.0, "images_per_sec": 240.0 * n * s,
             "jitter": 1.0, "iteration_s": 0.27, "exposed_s": 0.01, "sim_images_per_sec": 240.0 * n * s * 1.02,
             "sim_err_pct": 2.0, "whatif_images_per_sec": 240.0 * n * 1.0, "whatif_err_pct": (1 / s - 1) * 100,
             "params_agree": True}
            for f, s in (("25gbe", 0.87), ("100g-opa", 0.98)) for a in ("ring", "butterfly") for n in (2, 4, 8)]
    return make_record("bench.fabrics", {"fabrics": ["25gbe", "100g-opa"]},
                       {"rows": rows, "difference": {"points": 6, "measured_pct": 11.2, "sim_pct": 11.2,
                                                     "whatif_pct": 2.2}})


def _train(ranks):
    return make_record("train.bench", {"model": "resnet50", "num_ranks": ranks, "replay": None,
                                       "trainer": {"sync": "allreduce:ring", "overlap": "backward"}},
                       {"num_ranks": ranks, "per_rank_batch": 8, "global_batch": 8 * ranks,
                        "runtimes": {"ours": {"images_per_sec": 90.0 * ranks ** 0.9, "scaling_factor": ranks ** -0.1,
                                              "params_agree": True},
                                     "ddp": {"images_per_sec": 92.0 * ranks ** 0.9, "scaling_factor": None,
                                             "params_agree": True}}})


def _modes():
    rows = [{"mode": m, "ours_images_per_sec": 100.0 + i, "ddp_images_per_sec": 100.0, "ratio": 1 + i / 100,
             "iteration_ms": 300.0, "exposed_ms": 10.0, "cpu_ms": 330.0, "params_agree": True}
            for i, m in enumerate(("reduce:cb/none", "reduce:cb/forward", "reduce:cb/backward",
                                   "allreduce:ring/backward"))]
    return make_record("bench.train", {"modes": [r["mode"] for r in rows]}, rows)


def _stencil(kind):
    rows = []
    for fabric, bw in (("25gbe", 1.0), ("100g-opa", 4.0)):
        for n in (1, 2, 4, 8) if kind == "stencil.scale" else (64, 256, 1024):
            row = {"fabric": fabric, "num_ranks": n, "procs": [n, 1, 1], "compute_s": 0.08 / n,
                   "comm_s": 0.0 if n == 1 else 0.004 / bw, "face_bytes": [4096, 4096, 4096]}
            if kind == "stencil.scale":
                row |= {"compute_cpu_s": 0.07 / n, "sim_comm_s": None if n == 1 else 0.0042 / bw}
            else:
                row |= {"step_s": 0.08 / n + 0.004 / bw, "speedup": n * 0.9, "efficiency": 0.9}
            rows.append(row)
    return make_record(kind, {"cells": 128}, rows)


def _stencil_run():
    return make_record("stencil.run", {"cells": 32, "num_ranks": 2},
                       {"num_ranks": 2, "compute_s": 0.004, "comm_s": 0.001, "procs": [2, 1, 1]})


def _validate():
    rows = [{"topology": "star", "algo": a, "size_bytes": s, "measured_s": s / 1e8 * k, "plain_s": s / 1e8,
             "model_s": s / 1e8 * k * (1 + e), "err_plain_pct": (1 / k - 1) * 100, "err_model_pct": e * 100,
             "num_wrong": 0}
            for a, k, e in (("ring", 1.1, 0.04), ("butterfly", 1.2, -0.08)) for s in (2**20, 2**22, 2**24)]
    return make_record("validate", {"runs": []}, {"runs": [{"rows": rows, "model": {}}], "summary": {}})


def collectives_check():
    """A `validate.collectives` record: allgather fitted on 2 hosts and predicted on 4; alltoall measured only."""
    def row(op, hosts, size, measured_bw, predicted_bw):
        factor = (hosts - 1) / hosts
        t_us = size / (measured_bw / factor) / 1e3
        return {"op": op, "num_hosts": hosts, "role": "fit" if hosts == 2 else "check", "size_bytes": size,
                "measured_us": t_us, "measured_busbw_GBps": measured_bw, "choice": "ring/Simple", "num_wrong": 0,
                "predicted_us": None if predicted_bw is None else t_us * measured_bw / predicted_bw,
                "predicted_busbw_GBps": predicted_bw, "fit": "allgather" if predicted_bw else "",
                "error_pct": None if predicted_bw is None else (predicted_bw / measured_bw - 1) * 100,
                "time_error_pct": None if predicted_bw is None else (measured_bw / predicted_bw - 1) * 100}
    rows = [row("allgather", h, s, 0.1 * (1 - 2**-(s >> 16)), 0.1 * (1 - 1.3 * 2**-(s >> 16)))
            for h in (2, 4) for s in (1 << 18, 1 << 20, 1 << 24)]
    rows += [row("alltoall", h, s, 0.09, None) for h in (2, 4) for s in (1 << 18, 1 << 20, 1 << 24)]
    summary = [{"op": "allgather", "band": "< 1 MB", "rows": 1, "max_abs_error_pct": 4.1, "mean_abs_error_pct": 4.1},
               {"op": "allgather", "band": "1-16 MB", "rows": 2, "max_abs_error_pct": 0.6, "mean_abs_error_pct": 0.3}]
    fits = [{"ops": ["allgather", "alltoall"], "error": "collective 'alltoall': not modelled", "parameters": None},
            {"ops": ["allgather"], "error": "", "fitted_rows": [],
             "parameters": {"server.nic_efficiency": {"value": 0.9, "prior": 0.956, "fitted": True,
                                                      "at_bound": False}}},
            {"ops": ["alltoall"], "error": "collective 'alltoall': not modelled", "parameters": None}]
    return make_record("validate.collectives", {"ops": ["allgather", "alltoall"], "hosts": 4, "calibrate_hosts": 2},
                       {"rows": rows, "summary": summary, "fits": fits, "fit_mode": "per-op (the joint fit refused)",
                        "measurements": {}, "wall_s": 30.0})


def _published():
    def row(key, paper, unit, kind, published, baseline, mechanisms):
        out = {"key": key, "paper": paper, "where": "Sec. 2", "quantity": f"{key} as published", "unit": unit,
               "error_kind": kind, "published": published}
        for name, value in (("baseline", baseline), ("mechanisms", mechanisms)):
            err = (value - published) * (100 if unit == "fraction" else 1) if kind == "points" else \
                (value / published - 1) * 100
            out |= {name: value, f"{name}_error": err, f"{name}_within_goal": abs(err) <= (5 if kind == "points" else 10),
                    f"{name}_note": "test", f"{name}_inputs": [{"name": "profile", "value": "resnet50", "source": "test"}]}
        return out
    rows = [row("zhang-r50-2srv-100g", "Zhang et al. (NetAI'20)", "fraction", "points", 0.7505, 0.9987, 0.697),
            row("samsi-25gbe-vs-opa", "Samsi et al.", "%", "points", 12.78, 2.2, 11.2),
            row("awan-cb8-speedup", "Awan et al. (PPoPP'17)", "x", "relative", 2.3, 1.9, 2.2)]
    return make_record("validate.published", {"models": ["baseline", "mechanisms"]}, {"rows": rows})


def _plan():
    rows = [{"model": "resnet50", "fabric": f, "topology": "2-level fat tree", "levels": 2, "bisection": b, "gpus": g,
             "algo": "ring", "scaling_factor": sf, "images_per_s": 250.0 * g * sf, "network_usd": cost * g,
             "network_share": cost / 12000, "usd_per_image_per_s": 12000 / (250.0 * sf), "pareto": p}
            for g in (64, 512) for f, b, sf, cost, p in (("25gbe", "1/4", 0.80, 300.0, True),
                                                         ("100g-opa", "1", 0.95, 1100.0, True),
                                                         ("100gbe", "1", 0.93, 1500.0, False))]
    text = "resnet50 at 512 GPUs: the cheapest option that reaches 0.90 is 100g-opa, 2-level fat tree, bisection 1"
    return make_record("plan", {"model": "resnet50", "target": 0.9, "price_label": "illustrative prices",
                                "prices": "test table"},
                       {"rows": rows, "recommendations": [{"row": rows[4], "text": text}], "skipped": [], "stats": {}})


def _llm():
    split = {"compute": 1.9, "tp": 0.13, "cp": 0.0, "ep": 0.0, "pp": 0.02, "dp": 0.001, "optimizer": 0.001,
             "bubble": 0.4}
    step = sum(split.values())
    trace = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": t, "args": {"name": n}}
             for t, n in enumerate(("compute", "tp", "dp"))]
    trace += [{"name": f"F mb {i}", "ph": "X", "pid": 0, "tid": i % 3, "ts": 1e5 * i, "dur": 9e4} for i in range(12)]
    comm = [{"communicator": "tp", "collective": "allgather", "size_bytes": 6.7e7, "calls_per_step": 512.0,
             "time_s": 1.3e-4, "group": "2 GPUs in one server", "group_size": 2, "algorithm": "ring/Simple"}]
    links = [{"link": "s0.nic0->leaf0", "kind": "NIC-leaf", "bandwidth_Bps": 5e10, "bytes_per_step": 1.5e10,
              "busy_s": 0.3, "share_of_step": 0.3 / step, "num_as_busy": 32, "by": {"dpcp": 1.5e10}}]
    results = {"model": "llama3-8b", "parallel": "TP2 PP2 CP1 DP4", "num_gpus": 16, "cluster": "dgx-h100",
               "gpu": "H100", "step_time_s": step, "tokens_per_s": 65536 / step, "mfu": 0.45, "efficiency": 0.5,
               "efficiency_source": "not measured: 50% of peak assumed", "split_s": split, "communicators": comm,
               "busiest_links": links, "trace": trace}
    return make_record("whatif.llm", {"model": "llama3-8b", "gpus": 16}, results)


def _plan_llm():
    """An LLM plan of two options at two GPU counts (`plan --model llama3-70b`)."""
    rows = []
    for gpus in (1024, 4096):
        for option, rate, usd in (("dgx-h100 rail 400G", 400.0, 43.8e6), ("dgx-h100 rail 800G", 800.0, 51.0e6)):
            split = {"compute": 15.9, "tp": 0.0, "cp": 0.02, "ep": 0.0, "pp": 0.0, "dp": 0.36 * 400 / rate,
                     "optimizer": 0.001, "bubble": 0.0}
            step = sum(split.values())
            rows.append({"option": option, "cluster": "dgx-h100", "gpus": gpus, "parallel": "TP1 PP1 CP4 DP256 mbs1 Z3",
                         "tp": 1, "pp": 1, "cp": 4, "ep": 1, "dp": gpus // 4, "step_time_s": step,
                         "tokens_per_s": 1.6e7 / step * gpus / 1024, "mfu": 0.49, "memory_per_gpu_bytes": 5.2e10,
                         "split_s": split, "cluster_usd": usd * gpus / 1024, "network_usd": 5.4e6 * gpus / 1024,
                         "network_share": 0.12, "usd_per_token_per_s": usd / 1.0e6, "pareto": True})
    texts = [f"llama3-70b at {g:,} GPUs: the lowest cost per token/s is dgx-h100 rail 400G with TP1 PP1 CP4 "
             f"DP256 mbs1 Z3" for g in (1024, 4096)]
    return make_record("plan.llm", {"model": "llama3-70b", "gpus": [1024, 4096]},
                       {"rows": rows, "configs": [], "unfit": [], "recommendations": texts, "compute": [],
                        "stats": {"num_enumerated": 2760, "num_fit": 1300, "num_simulated": 4, "num_options": 2,
                                  "model": "llama3-70b"}})


def _predicted(collective="allreduce"):
    """A cluster's predicted nccl-tests table (`simulate collective --cluster`)."""
    rows = [{"size_bytes": size, "time_us": size / bw / 1e3, "algbw_GBps": bw / 2, "busbw_GBps": bw,
             "busbw_low_GBps": bw / 2, "busbw_high_GBps": bw * 1.5, "algorithm": "ring/Simple",
             "prior_parameters": ["nic efficiency"]} for size, bw in ((1 << 20, 10.0), (1 << 26, 80.0), (1 << 30, 160.0))]
    return make_record("simulate.cluster", {"cluster": "dgx-h100", "cluster_name": "dgx-h100", "num_gpus": 1024,
                                            "collective": collective}, rows)


def _bench():
    rows = [{"algo": algo, "op": "allreduce", "size_bytes": size, "time_us": size / bw / 1e3, "algbw_GBps": bw / 1.5,
             "busbw_GBps": bw, "busbw_vs_native": None, "num_wrong": 0}
            for algo, k in (("ring", 1.0), ("butterfly", 0.8)) for size, bw in ((1024, 0.1 * k), (1 << 20, 2.0 * k))]
    return make_record("collectives.bench", {"algos": ["ring", "butterfly"], "num_ranks": 4}, rows)


def _calibrate():
    def row(gpus, size, predicted, error):
        return {"source": f"/logs/nccl_{gpus}.log", "num_gpus": gpus, "size_bytes": size, "choice": "ring/LL",
                "measured_busbw_GBps": round(predicted / (1 + error / 100), 2), "predicted_busbw_GBps": predicted,
                "error_pct": error, "inplace_error_pct": None, "held_out": gpus == 8, "collective": "allreduce",
                "busbw_low_GBps": None, "busbw_high_GBps": None}
    residuals = [row(g, 8 << (3 * i), 0.001 * 8 ** i * g, (-1) ** i * (2.0 + i)) for g in (2, 8) for i in range(9)]
    params = {"server.nic_efficiency": {"value": 0.74, "prior": 0.99, "fitted": True, "at_bound": False},
              "library.launch_s": {"value": 3.8e-6, "prior": 4e-6, "fitted": False, "at_bound": False}}
    return make_record("calibrate.nccl-tests", {"logs": ["/logs/nccl_2.log"], "nic": "HDR"},
                       {"parameters": params, "residuals": residuals, "fitted_rows": [], "held_out_rows": [],
                        "held_out_coverage": [], "nccl_version": "2.7.8"})


def _no_section():
    """A record no section draws, with a 2,048-value list (as `bench overhead`'s rank times would be)."""
    return make_record("bench.overhead", {"model": "resnet50"},
                       {"ratio": 0.871, "goal_ratio": 0.97, "rank_finish_s": [1.0 + (i % 97) / 1000 for i in range(2048)]})


def _validate_llm():
    rows = [{"part": p, "measured_s": m, "predicted_s": q, "share": m / 0.36, "error": (q - m) / m if m else None,
             "goal": g, "ok": None if g is None else abs(q - m) <= g * m}
            for p, m, q, g in (("step", 0.36, 0.34, 0.15), ("compute", 0.07, 0.05, None), ("pp", 0.04, 0.05, 0.25),
                               ("dp", 0.19, 0.22, 0.25), ("bubble", 0.03, 0.02, None))]
    return make_record("validate.llm", {"model": "gpt-tiny", "hosts": 4},
                       {"parallel": "TP1 PP2 CP1 DP2", "rows": rows, "passed": True,
                        "calibration": {"one_rank_step_s": 0.21, "loopback_step_s": 168e-6}})


def _nccl_corpus():
    def band(name, goal, cluster, median, worst, inside, ranged, degraded=False, clusters=None):
        row = {"band": name, "goal_pct": goal, "cluster": cluster, "model": "mechanisms", "rows": ranged,
               "mean_abs_error_pct": median, "median_abs_error_pct": median, "max_abs_error_pct": worst,
               "within_goal": worst <= goal, "median_within_goal": median <= goal, "ranged": ranged,
               "inside": inside, "servers": [16], "degraded": degraded}
        if clusters:
            row.update(clusters=clusters, clusters_within_goal=int(worst <= goal),
                       clusters_median_within_goal=int(median <= goal))
        return row
    bands = [band("1-16 MB", 25.0, "small-roce", 7.0, 15.0, 5, 5), band("1-16 MB", 25.0, "slow !", 140.0, 160.0, 0, 2,
                                                                     True),
             band("1-16 MB", 25.0, "all", 7.0, 15.0, 5, 5, clusters=1),
             band("1-16 MB", 25.0, "all+degraded", 9.0, 160.0, 5, 7, clusters=2)]
    return make_record("validate.nccl-tests", {"corpus": "examples/nccl-corpus", "models": ["mechanisms"]},
                       {"bands": bands, "clusters": []})


def sample_records() -> list[dict]:
    """One or more records of every kind the report has a section for, plus one it has none for."""
    return [_fatness(), _whatif(), _whatif("whatif.reproduce"), _fabrics(), _train(2), _train(4), _modes(),
            _stencil("stencil.scale"), _stencil("stencil.simulate"), _stencil_run(), _validate(), _validate_llm(), _nccl_corpus(),
            collectives_check(), _published(), _plan(), _bench(), _calibrate(), _llm(), _plan_llm(), _predicted(),
            _predicted("allgather"), _no_section()]


def as_stored(records: list[dict]) -> list[Stored]:
    return [Stored(id=i + 1, record=r) for i, r in enumerate(records)]
