"""plan: see the module docstrings."""
