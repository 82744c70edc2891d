"""Collective algorithms as schedules (pure data), the symbolic verifier and closed-form cost models.

Standard library and numpy only: nothing here imports torch, the simulator or the runtime, and this
package imports none of its modules eagerly (import `fabriclab.collectives.registry` and friends directly).

Try it: `fabriclab collectives verify --algo all --ranks 1-16`.
"""
