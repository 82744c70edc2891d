"""train: see the module docstrings."""
