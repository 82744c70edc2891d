"""stencil: see the module docstrings."""
