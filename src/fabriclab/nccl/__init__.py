"""nccl: see the module docstrings."""
