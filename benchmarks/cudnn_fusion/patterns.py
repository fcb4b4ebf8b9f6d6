"""The patterns the probe knows: each graph's name, title and the convolution
alone it is timed against."""

from cudnn_fusion.graphs import (bn_add_relu, bn_finalize, bn_finalize_pointwise, conv_dgrad,
                                 conv_fprop, conv_wgrad, dgrad_with, drelu_dbn, fprop_with,
                                 sbr_wgrad)


class Pattern:
    """One graph to probe.

    Args:
      name: the key in the JSON and on the command line.
      baseline: the convolution alone it is compared with: "fprop", "dgrad" or "wgrad".
      title: the row's name in the tables.
      build: function(cell) -> (graph, variant pack, check); see cudnn_fusion.graphs.
    """

    def __init__(self, name, baseline, title, build):
        self.name, self.baseline, self.title, self.build = name, baseline, title, build


PATTERNS = [
    Pattern("conv_fprop", "fprop", "conv forward alone", conv_fprop),
    Pattern("conv_dgrad", "dgrad", "conv backward-data alone", conv_dgrad),
    Pattern("conv_wgrad", "wgrad", "conv backward-filter alone", conv_wgrad),
    Pattern("sbr_conv_genstats", "fprop", "scale-bias-ReLU → conv → genstats", fprop_with(True, "genstats")),
    Pattern("conv_genstats", "fprop", "conv → genstats", fprop_with(False, "genstats")),
    Pattern("conv_sum", "fprop", "conv → sum reduction", fprop_with(False, "sum")),
    Pattern("conv_sqsum", "fprop", "conv → square → sum reduction", fprop_with(False, "sqsum")),
    Pattern("conv_sum_sqsum", "fprop", "conv → sum and square → sum (two reductions)", fprop_with(False, "sum_sqsum")),
    Pattern("sbr_conv", "fprop", "scale-bias-ReLU → conv", fprop_with(True, None)),
    Pattern("sbr_conv_sum", "fprop", "scale-bias-ReLU → conv → sum reduction", fprop_with(True, "sum")),
    Pattern("sbr_conv_sum_sqsum", "fprop", "scale-bias-ReLU → conv → two reductions", fprop_with(True, "sum_sqsum")),
    Pattern("bn_finalize", "fprop", "batch-norm finalize (bn_finalize node)", bn_finalize),
    Pattern("bn_finalize_pointwise", "fprop", "batch-norm finalize as pointwise ops", bn_finalize_pointwise),
    Pattern("dgrad_drelu", "dgrad", "dgrad → dReLU (stored input)", dgrad_with("stored", None)),
    Pattern("dgrad_bn_drelu", "dgrad", "dgrad → dReLU (BN apply recomputed)", dgrad_with("bn", None)),
    Pattern("dgrad_bn_drelu_dbn_weight", "dgrad", "dgrad → dReLU → dbn_weight", dgrad_with("bn", "node")),
    Pattern("dgrad_bn_drelu_dbn_sums", "dgrad", "dgrad → dReLU → dgamma, dbeta reductions", dgrad_with("bn", "sums")),
    Pattern("sbr_wgrad", "wgrad", "scale-bias-ReLU → wgrad", sbr_wgrad),
    Pattern("bn_add_relu", "fprop", "batch norm (training) + add + ReLU", bn_add_relu(False)),
    Pattern("bn_inference_add_relu", "fprop", "batch-norm apply + add + ReLU", bn_add_relu(True)),
    Pattern("drelu_dbn", "dgrad", "dReLU (stored output) → dBN, dResidual out", drelu_dbn(False)),
    Pattern("bn_inference_drelu_dbn", "dgrad", "BN apply recomputed → dReLU → dBN", drelu_dbn(True)),
]
PATTERN_BY_NAME = {p.name: p for p in PATTERNS}
# The convolution alone, by direction: timed in every cell whose graphs compare with it.
BASELINES = {"fprop": "conv_fprop", "dgrad": "conv_dgrad", "wgrad": "conv_wgrad"}
