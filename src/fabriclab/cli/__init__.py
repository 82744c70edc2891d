"""The `fabriclab` command line: one typer app (`main.py`), one module per command group.

Try it: `fabriclab --help`.
"""
