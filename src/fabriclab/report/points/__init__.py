"""Plans and sweeps as points: run on this machine or on a Dask cluster, kept in the results store as they
finish, resumable (`runner.PointRunner`; the pools in `pools.py`, progress in `progress.py`).

Try it: `fabriclab plan --model resnet50 --gpus 64,256 --scheduler tcp://127.0.0.1:8786 --resume`.
"""
