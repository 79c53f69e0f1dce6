"""Collect stage: running a workload (ncu on a GPU, torch.profiler, the CPU, the meta device) and measuring a
machine's ceilings; what it records goes through the importers into the store."""
