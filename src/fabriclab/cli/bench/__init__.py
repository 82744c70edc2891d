"""`fabriclab bench`: benchmarks that print a figure and the ratio to the peer measured beside it.

`cli` times whole commands against their start-up budgets, `sim` the simulator, `whatif` the what-if
sweep of Zhang et al. (NetAI'20), `plan` the network planner (`speed`); `overhead` our trainer against a
plain loop, `train` our trainer against DDP (`train`); `fabrics` the fabric benchmark of Samsi et al.
(TX-GAIA) in the emulated cluster (`fabrics`); `astra-sim` an LLM step against ASTRA-sim (`astra`); `simai`
collectives in SimAI's packet-level simulator against fabriclab's model (`simai`).

Try it: `fabriclab bench cli`.
"""

from __future__ import annotations

import typer

HELP = ("Benchmarks: CLI start-up, simulator, what-if and plan speed, trainer modes vs DDP, fabrics in the "
        "emulated cluster, an LLM step vs ASTRA-sim, collectives vs SimAI's ns-3 (collectives: `collectives "
        "bench`).")
# One line per command in `bench --help`, whole (click cuts a docstring's first sentence at 45 characters
# with `...`); each command's own --help keeps its full text.
SHORT = {"cli": "Start-up time of whole commands against their budgets.",
         "sim": "Simulator speed against its targets (or SimGrid: --peer).",
         "whatif": "The what-if sweep of Zhang et al. against its replay.",
         "plan": "CNN plan speed: 5 fabrics x 5 bisections x 5 GPU counts.",
         "plan-llm": "LLM plan speed: Llama 3 405B on 16,384 GPUs.",
         "llm-step": "One simulated Llama 3 405B step: time and memory.",
         "cluster": "Plan points per second: local, 2 processes, Dask.",
         "overhead": "The trainer's own cost against a plain PyTorch loop.",
         "train": "Our trainer in every sync x overlap mode against DDP.",
         "train-llm": "Our transformer trainer against PyTorch and DTensor.",
         "fabrics": "Samsi et al.'s fabric benchmark, emulated (root).",
         "astra-sim": "One LLM step in fabriclab and in ASTRA-sim.",
         "simai": "Collectives in SimAI's ns-3 beside fabriclab's model."}


def register(main_app: typer.Typer) -> None:
    """Add the `bench` group (its commands from `speed`, `train`, `fabrics`, `astra` and `simai`) to `main_app`."""
    from fabriclab.cli.bench import astra, fabrics, simai, speed, train, train_llm

    app = typer.Typer(help=HELP, no_args_is_help=True, rich_markup_mode=None)
    for module in (speed, train, train_llm, fabrics, astra, simai):
        module.register(_ShortHelp(app))
    main_app.add_typer(app, name="bench")


class _ShortHelp:
    """The bench app as its modules see it: `command(name)` adds the command with its line of SHORT, through
    typer's public `short_help` (no reading back of typer's registered commands)."""

    def __init__(self, app: typer.Typer) -> None:
        self.app = app

    def command(self, name: str, **kwargs):
        return self.app.command(name, **{"short_help": SHORT.get(name), **kwargs})
