"""published: see the module docstrings."""
