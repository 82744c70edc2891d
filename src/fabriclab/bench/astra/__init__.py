"""astra: ASTRA-sim as the peer of the LLM step simulator; see the module docstrings."""
