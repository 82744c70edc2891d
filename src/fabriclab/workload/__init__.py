"""Workloads: the model zoo (layer tables), profiles, the profiler and trace formats.

Try it: `fabriclab models`.
"""
