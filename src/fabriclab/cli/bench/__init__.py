"""`fabriclab bench`: benchmarks that print a figure and the ratio to the peer measured beside it.

`cli` times whole commands against their start-up budgets, `sim` the simulator, `whatif` the what-if
sweep of Zhang et al. (NetAI'20), `plan` the network planner (`speed`); `overhead` our trainer against a
plain loop, `train` our trainer against DDP (`train`); `fabrics` the fabric benchmark of Samsi et al.
(TX-GAIA) in the emulated cluster (`fabrics`); `astra-sim` an LLM step against ASTRA-sim (`astra`).

Try it: `fabriclab bench cli`.
"""

from __future__ import annotations

import typer

HELP = ("Benchmarks: CLI start-up, simulator, what-if and plan speed, trainer modes vs DDP, fabrics in the "
        "emulated cluster, an LLM step vs ASTRA-sim (collectives: `collectives bench`).")


def register(main_app: typer.Typer) -> None:
    """Add the `bench` group (its commands from `speed`, `train`, `fabrics` and `astra`) to `main_app`."""
    from fabriclab.cli.bench import astra, fabrics, speed, train, train_llm

    app = typer.Typer(help=HELP, no_args_is_help=True, rich_markup_mode=None)
    for module in (speed, train, train_llm, fabrics, astra):
        module.register(app)
    main_app.add_typer(app, name="bench")
