"""A pass on a GPU that runs one collective at a time: ASTRA-sim's rule, for comparing like with like.

ASTRA-sim issues at most one collective or send per rank at a time (astra-sim 518bd51,
`workload/HardwareResource.cc`: `is_available` refuses a second GPU comm node; receives are exempt), where
NCCL runs collectives of different streams side by side: FSDP's parameter gathers on their own stream
beside TP's collectives on the compute stream. `StepOptions(one_collective_at_a_time=True)` costs a ZeRO-3
pass under ASTRA-sim's rule, op by op: one engine, each collective starting when it is issued and the
engine is free, in the order they are issued (the next unit's gather as a layer starts, the layer's
collectives as its compute reaches them, the unit's reduce-scatter after its backward). The compute
stream waits for its exposed collectives; what it waits for the engine is exposed DP time. `fabriclab
bench astra-sim` prints this step beside the overlapped one, so the two tools' difference can be told
apart from the rule's.

Try it: `fabriclab bench astra-sim --zero 3` (the row "fabriclab, one collective at a time").
"""

from __future__ import annotations

from fabriclab.whatif.llm.program import Work
from fabriclab.whatif.llm.step import SPLIT_KEY, PassCost


def serial_pass(model, layer_passes) -> PassCost:
    exposed: dict[str, float] = {}
    layers = []
    t = engine = 0.0
    compute_total = 0.0
    gather_end = {}
    if layer_passes and layer_passes[0].gather:
        engine = gather_end[0] = sum(map(model.call_s, layer_passes[0].gather))

    def add(name: str, value: float) -> None:
        if value > 0:
            exposed[name] = exposed.get(name, 0.0) + value

    for i, lp in enumerate(layer_passes):
        start = max(t, gather_end.get(i, 0.0))
        add("dp", start - t)
        if i + 1 < len(layer_passes) and layer_passes[i + 1].gather:  # prefetch as this layer starts
            engine = gather_end[i + 1] = max(engine, start) + sum(map(model.call_s, layer_passes[i + 1].gather))
        t = issued = start
        compute = 0.0
        layer_exposed: dict[str, float] = {}
        hidden_end = start
        for op in lp.ops:
            if isinstance(op, Work):
                d = sum(model.work_s(op))
                issued, t, compute = t, t + d, compute + d
                continue
            d, name = model.call_s(op), SPLIT_KEY[op.communicator]
            hidden = op.overlap in ("attention", "compute") or (op.overlap == "linear" and model.options.tp_overlap)
            begin = max(issued if hidden else t, engine)
            engine = begin + d
            if hidden:
                hidden_end = max(hidden_end, engine)
                continue
            add("dp", begin - t)  # the engine was busy with ZeRO-3's traffic
            layer_exposed[name] = layer_exposed.get(name, 0.0) + d
            add(name, d)
            t = engine
        if hidden_end > t:
            add("dp", hidden_end - t)
            t = hidden_end
        layers.append((lp.layer, start, compute, layer_exposed))
        compute_total += compute
        if lp.reduce:
            engine = max(engine, t) + sum(map(model.call_s, lp.reduce))
    if engine > t:
        add("dp", engine - t)
    return PassCost(compute_s=compute_total, exposed_s=exposed, layers=layers)
