"""Advice: what to change in a PyTorch step, from its roofline, with the evidence and what it can win."""
