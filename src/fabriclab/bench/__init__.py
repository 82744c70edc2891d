"""Benchmark harnesses: real collectives (nccl-tests/OSU style), simulator speed, fatness and what-if sweeps.

Try it: `fabriclab collectives bench --algo ring,native --np 4 --sizes 1KB:1MB`.
"""
