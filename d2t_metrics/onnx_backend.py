"""An ONNX Runtime copy of a loaded encoder classifier, for faster inference on the CPU.

Opt-in (``nli_semantic_accuracy``'s ``backend="onnx"``). On the project's 2-core CPU it
ran the NLI cross-encoder on the same length-sorted batches 1.8x faster than PyTorch,
with label probabilities within 4e-6 of PyTorch's and identical labels
(``benchmarks/RESULTS.md``, sections ``nli_speed_*``). The graph is exported in memory
from the model already loaded (adapters merged, float32): nothing is written to disk,
and the weights are those the PyTorch path uses. Needs ``onnxruntime`` and ``onnx``
(``pip install "d2t-metrics[onnx]"``).
"""

from __future__ import annotations

import importlib.util
import io
import warnings
from typing import Mapping, Optional, Sequence

import numpy as np

from .tables import short_repr

BACKENDS = ("torch", "onnx")
NEEDED = ("onnxruntime", "onnx")
# the graph is traced at this shape; batch and length are dynamic axes
_TRACE_SHAPE = (2, 8)


def check_backend(backend, device: Optional[str] = None) -> str:
    """``backend`` if it is usable here, else a ``ValueError`` saying why (before any model loads)."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, got {short_repr(backend)}")
    if backend == "onnx":
        missing = [m for m in NEEDED if importlib.util.find_spec(m) is None]
        if missing:
            raise ValueError(f"backend='onnx' needs {' and '.join(missing)}: pip install \"d2t-metrics[onnx]\" "
                             "(or pip install onnxruntime onnx), or use backend='torch'")
        if device is not None and not str(device).startswith("cpu"):
            raise ValueError(f"backend='onnx' runs on the CPU, and the model is on {device!r}: use backend='torch' "
                             "there, or load the metric with device='cpu'")
    return backend


class OnnxClassifier:
    """``logits = OnnxClassifier(model, names)(batch)``: the logits of a transformers
    classifier (float32, on the CPU) for a batch of numpy arrays named ``names``
    (e.g. ``input_ids``, ``attention_mask``, ``token_type_ids``), from ONNX Runtime."""

    def __init__(self, model, input_names: Sequence[str], threads: Optional[int] = None):
        import onnxruntime  # lazy: the optional onnx extra, needed by backend="onnx" only
        import torch  # lazy: torch, which the model-free metrics do not need

        if any(p.dtype != torch.float32 or p.device.type != "cpu" for p in model.parameters()):
            raise ValueError("backend='onnx' exports a float32 model on the CPU; this one is not (use backend='torch')")
        self.input_names = list(input_names)
        wrapper = _logits_module(torch, model, self.input_names).eval()
        example = tuple(torch.ones(_TRACE_SHAPE, dtype=torch.long) for _ in self.input_names)
        axes = {name: {0: "batch", 1: "length"} for name in self.input_names}
        buffer = io.BytesIO()
        with warnings.catch_warnings(), torch.inference_mode():
            # the tracer's notes on Python control flow in the model's code: the graph is
            # checked against PyTorch by the tests and benchmarks, not by these warnings
            warnings.simplefilter("ignore")
            torch.onnx.export(wrapper, example, buffer, input_names=self.input_names, output_names=["logits"],
                              dynamic_axes={**axes, "logits": {0: "batch"}}, opset_version=17, dynamo=False)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = int(threads or torch.get_num_threads())
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = onnxruntime.InferenceSession(buffer.getvalue(), options, providers=["CPUExecutionProvider"])

    def __call__(self, batch: Mapping):
        feeds = {name: np.asarray(batch[name], dtype=np.int64) for name in self.input_names}
        return self.session.run(["logits"], feeds)[0]


def _logits_module(torch, model, names):
    """A module whose positional inputs are ``names``, in order, returning the logits (the
    exporter passes inputs by position; a model's own argument order varies)."""

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *tensors):
            return self.model(**dict(zip(names, tensors))).logits

    return Logits()
