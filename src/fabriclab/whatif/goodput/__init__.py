"""Goodput: the tokens a training job keeps when its cluster fails (rates, domains, checkpoint, goodput)."""
