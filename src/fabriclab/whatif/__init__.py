"""What-if: a training iteration replayed from a profile, with a fusion policy and a collective cost.

Try it: `fabriclab whatif --profile resnet50 --workers 16,32,64 --bandwidth 1,10,25,40,100Gbps`.
"""
