"""simai: SimAI's packet-level (ns-3) and analytical simulators beside fabriclab's collective model; see the
module docstrings (inputs, cluster, runner, fct, compare).

Try it: `fabriclab bench simai --gpus 32 --oversubscription 1 --collectives allreduce --sizes 16MiB --repeats 1`.
"""
