"""hroofline: hierarchical roofline analysis of the GPU kernels of deep-learning workloads.

The pipeline, one stage per subpackage: collect -> importers -> store -> analyze -> render.
The central type passed between the stages is :class:`hroofline.model.Run`.
"""

__version__ = "0.1.0"
