"""Flow-level network simulator: transfers on routes, max-min fair sharing, task DAGs.

Try it: `fabriclab simulate collective --algo ring --topology fat-tree --hosts 512 --bisection 1/4`.
"""
