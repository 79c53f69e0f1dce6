"""The work of ops: what an ATen op computes and moves, and the known work of the calibration.

``ops`` (FLOPs and fewest bytes per op, the op recorder), ``op_names`` (which ops are matrix products,
convolutions, attention), ``fused_attention`` and ``autocast`` (what PyTorch runs on a GPU, traced on the meta
device), ``calibration`` (the doctor's cases). Used by collection (predict, the CPU recorder) and by the trace
importer alike.
"""
