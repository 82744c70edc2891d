"""Real execution over torch.distributed: the schedule executor, the data-parallel trainer and the launcher
of local or cluster ranks (`launch`; `environment` detects a torchrun/Slurm/MPI launch without torch,
`health` names dead or absent ranks, `devices` puts ranks on CPUs or GPUs and picks the backend), mixed
precision (`precision`) and the CUDA streams of the trainer's helper threads (`streams`). This package
imports none of its modules eagerly.

Try it: `fabriclab collectives bench --algo ring,native --np 4 --sizes 1KB:1MB`.
"""
