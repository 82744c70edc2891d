"""collectives: see the module docstrings."""
