"""speed: see the module docstrings."""
