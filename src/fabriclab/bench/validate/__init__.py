"""validate: see the module docstrings."""
