"""The cuDNN fusion probe's modules; the command is ``benchmarks/cudnn_fusion_probe.py``.

- :mod:`~cudnn_fusion.settings`: data types, layouts, ResNet-50's shapes, tolerances;
- :mod:`~cudnn_fusion.cell`: one cell's tensors and shared graph pieces;
- :mod:`~cudnn_fusion.graphs`: the graph builders, one per pattern;
- :mod:`~cudnn_fusion.patterns`: the patterns' names, titles and baselines;
- :mod:`~cudnn_fusion.measure`: building, running, checking and timing one graph;
- :mod:`~cudnn_fusion.tables`: the Markdown tables and the errors of a run.

PyTorch and cudnn-frontend are imported by the command's worker only, which
binds them in :mod:`~cudnn_fusion.cell`, :mod:`~cudnn_fusion.graphs` and
:mod:`~cudnn_fusion.measure`.
"""
