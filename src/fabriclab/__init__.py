"""fabriclab: run, simulate and compare collectives and data-parallel training on network fabrics.

Try it: `fabriclab run`.
"""

__version__ = "0.1.0"
