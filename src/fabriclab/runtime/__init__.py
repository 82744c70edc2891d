"""Real execution over torch.distributed: the schedule executor and the launcher of local or cluster ranks.

Try it: `fabriclab collectives bench --algo ring,native --np 4 --sizes 1KB:1MB`.
"""
