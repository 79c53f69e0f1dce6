"""Kernel families: one name for the kernels that do the same job in different precisions or tiles.

Kernel names change between precisions (``volta_scudnn_128x64_relu_interior_nn_v1`` in FP32 becomes
``volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_..._nn_v1`` with AMP), so comparing two runs kernel by
kernel needs a name without the architecture, the precision, the tile shape and the variant:
both of those are ``cudnn``. Template arguments and parameters go too, so
``implicit_convolve_sgemm<float, ...>`` and ``implicit_convolve_sgemm<__half, ...>`` meet. Convolution
kernels then become one family, ``convolution``: cuDNN's algorithm choice changes with the precision.
"""

from __future__ import annotations

import re
from functools import cache

from hroofline.model.names import short_kernel_name

_ARCH_PREFIX = re.compile(r"^(maxwell|pascal|volta|turing|ampere|ada|hopper|blackwell|sm\d+[a-z]?)_")
# Tokens that say how, not what: precision, tensor-core shape, tile, load width, layout, variant.
_NOISE = re.compile(
    r"^(fp16|fp32|bf16|tf32|f16|f32|f2f|f2h|h2f|i8|s\d{3,4}|h\d{3,4}|i\d{4,5}|\d+(x\d+)+|ldg\d+|stg\d+|relu|"
    r"interior|small|medium|large|xregs|nn|nt|tn|tt|v\d+|exp|nchw|nhwc|nhwc2nchw|nchw2nhwc|tile\d+\w*|"
    r"filter\d+x\d+|stridedb|splitk|sliced\d+x\d+|align\d+|warpspecialized|cooperative|pingpong)$"
)
_SAME_JOB = {"scudnn": "cudnn", "hcudnn": "cudnn", "sgemm": "gemm", "hgemm": "gemm", "dgemm": "gemm"}
_PRECISION_GLUE = re.compile(r"^(s|h|d|i)(\d{3,4})(cudnn|gemm)$")  # s884cudnn, h1688gemm


# cuDNN and friends pick a different algorithm per precision (implicit GEMM, Winograd, tensor-core HMMA,
# separate dgrad/wgrad engines), so every convolution kernel is one family; depthwise ones stay apart.
# cuDNN's depthwise kernels are named for one channel and one filter per group (conv2d_c1_k1_nhwc_specialized,
# dgrad2d_c1_k1_..., wgrad2d_c1_k1_...: an H200 trace of ConvNeXt-T launches all three for each depthwise
# convolution). Some depthwise gradients run on kernels grouped convolutions share (wgrad2d_shmem_tiling,
# dgrad2d_grouped_direct): those stay convolutions.
_DEPTHWISE = re.compile(r"depthwise|(?:^|_)c1_k1(?:_|$)")
DEPTHWISE_FAMILY = "depthwise_convolution"
_CONVOLUTION = re.compile(r"cudnn|conv|winograd|wgrad|dgrad|fprop|implicit_gemm")


@cache
def kernel_family(name: str) -> str:
    family = _name_family(name)
    if _DEPTHWISE.search(family):
        return DEPTHWISE_FAMILY
    if _CONVOLUTION.search(family):
        return "convolution"
    return family


def _name_family(name: str) -> str:
    short = short_kernel_name(name)
    base = short.split("<", 1)[0].strip().lower()
    base = _ARCH_PREFIX.sub("", base)
    tokens = []
    for token in base.split("_"):
        glued = _PRECISION_GLUE.match(token)
        if glued:
            token = glued.group(3)
        token = _SAME_JOB.get(token, token)
        if token and not _NOISE.match(token):
            tokens.append(token)
    return "_".join(tokens) or base
