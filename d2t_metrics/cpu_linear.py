"""The generators' linear layers on an x86-64 CPU: oneDNN with weights packed once.

PyTorch's CPU wheels run a float32 ``nn.Linear`` through MKL's sgemm, which,
like most GEMMs, copies the weight into its own blocked layout on every call.
A decoding step multiplies a few dozen rows by every weight of the model, so
that copy is a large share of each call. oneDNN's inner product on a
weight packed once at load (``torch.ops.mkldnn._reorder_linear_weight``, what
``torch.compile`` uses for frozen CPU models) skips it: on the 2-core AMD EPYC
(AVX-512) of the project's CPU runs, one thread, 37 rows, SmolLM2's layers ran
at 105 instead of 83 GFLOP/s and its 49,152-word LM head at 92 instead of 51.

Whole command lines, before and after, alternating (RESULTS.md `quiet_checks`,
session 37): all five metrics on the bundled lines 1.20x less CPU time,
data_questeval on 60 WebNLG outputs 1.24x, fact_accuracy on 300 1.36x, every
output byte-identical; peak memory 0.15-0.25 GB higher. The sums are the same
float32 products in another order, as when a batch changes: a continuation can
only change where two tokens tie to the last bits. The encoders (NLI, DAE, QA) gained under 10 %
and keep torch's layers, so that their ONNX export (``backend="onnx"``) still
sees plain ``nn.Linear`` modules.

:func:`pack_linear_layers` swaps a loaded model's ``nn.Linear`` modules for
:class:`PackedLinear`; :func:`d2t_metrics.generator.load_generator` does so for
float32 models on the CPU unless ``D2T_CPU_LINEAR=torch``. A packed layer keeps
no other copy of its weight (the memory of the old one is given back), but it
cannot be trained, saved or moved to a GPU: only the cached inference models are
packed. An LM head tied to the embedding gets a packed copy of its own, and the
embedding's pages go back to the file it was mapped from (its lookups read few
rows), so the copy costs about nothing.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import platform
import struct
import sys
from typing import Dict

import torch

ENV_VAR = "D2T_CPU_LINEAR"
CHOICES = ("onednn", "torch")
# oneDNN picks its blocked layout for a typical row count; any row count works
# (16 to 1,024 gave the same speed for 8 to 300 rows on the machine above).
BATCH_HINT = 64
_MADV_DONTNEED = 4  # Linux


def cpu_linear_choice() -> str:
    """``D2T_CPU_LINEAR``: ``onednn`` (the default) or ``torch`` (torch's own kernels)."""
    value = os.environ.get(ENV_VAR, "").strip().lower() or "onednn"
    if value not in CHOICES:
        raise ValueError(f"{ENV_VAR}={os.environ.get(ENV_VAR)!r}: choose one of {', '.join(CHOICES)}")
    return value


def onednn_available() -> bool:
    """Whether this torch has oneDNN's packed inner product, on an x86-64 CPU (where it was measured)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    if not torch.backends.mkldnn.is_available():
        return False
    return hasattr(torch.ops.mkldnn, "_linear_pointwise") and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")


def use_packed_layers(device: str, dtype) -> bool:
    """Whether a model loaded on ``device`` in ``dtype`` gets :class:`PackedLinear` layers."""
    return (str(device).startswith("cpu") and dtype == torch.float32 and cpu_linear_choice() == "onednn"
            and onednn_available())


class PackedLinear(torch.nn.Module):
    """``nn.Linear``'s product by oneDNN, on a weight packed once; CPU and float32 only."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        with torch.no_grad():
            # Plain attributes, not parameters: nothing can train or move them by mistake. The
            # weight is always packed: oneDNN given a plain weight keeps a reordered copy of it
            # for every row count it meets (measured: +1.3 GB for SmolLM2's tied LM head over
            # 119 row counts; packed, +75 MB).
            self.weight = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), BATCH_HINT)
            self.bias = None if linear.bias is None else linear.bias.detach().clone()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "cpu" or x.dtype != torch.float32:
            raise RuntimeError(f"a packed CPU layer got a {x.dtype} tensor on {x.device}; load the model again for "
                               f"that device (d2t_metrics.cpu_linear)")
        return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, oneDNN"


def pack_linear_layers(model: torch.nn.Module) -> int:
    """Replace every ``nn.Linear`` of ``model`` (float32, on the CPU) by a :class:`PackedLinear`,
    in place; returns how many. Subclasses of ``nn.Linear`` (quantized ones) are left alone."""
    slots = [(parent, name) for parent in model.modules() for name, child in parent.named_children()
             if type(child) is torch.nn.Linear]
    for parent, name in slots:
        weight = getattr(parent, name).weight
        if weight.device.type != "cpu" or weight.dtype != torch.float32:
            raise ValueError(f"pack_linear_layers needs float32 weights on the CPU, got {weight.dtype} on {weight.device}")
    # how many parameters of which modules use each piece of memory: an LM head tied to the
    # embedding shares its weight (the same parameter, or another one over the same storage)
    holders: Dict[int, int] = {}
    for module in model.modules():
        for tensor in module.parameters(recurse=False):
            key = tensor.untyped_storage().data_ptr()
            holders[key] = holders.get(key, 0) + 1
    mapped = _mapped_checkpoints()
    packed = {}
    for parent, name in slots:
        linear = getattr(parent, name)
        if id(linear) not in packed:  # a module registered twice is packed once
            packed[id(linear)] = PackedLinear(linear)
            # a weight no other module holds is dead now; a shared one (the embedding) only if
            # none of its pages was written, so that the file gives it back as it was
            _give_back_pages(linear.weight, mapped, in_use=holders[linear.weight.untyped_storage().data_ptr()] > 1)
        setattr(parent, name, packed[id(linear)])
        del linear
    give_back_free_memory()
    return len(packed)


def give_back_free_memory() -> None:
    """Ask glibc to return the free pages of its heaps to the system (``malloc_trim``; a no-op
    elsewhere). A packed model's weights live on the heap, where the mapped file's did not,
    and long-lived blocks there keep the heap from shrinking as freed caches and logits
    would let it: the 20 bundled lines peaked at 3.8 GB instead of 3.3 without this call
    after each decoding chunk (torch's layers: 2.9)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # not glibc (musl has no malloc_trim)
        return
    trim(0)


def _mapped_checkpoints():
    """``(start, end)`` of this process's private mappings of safetensors files (Linux; else none)."""
    if not sys.platform.startswith("linux"):
        return []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    spans = []
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[1].endswith("p") and parts[5].endswith(".safetensors"):
            start, end = parts[0].split("-")
            spans.append((int(start, 16), int(end, 16)))
    return spans


def _page_span(tensor: torch.Tensor):
    """The first and end addresses of the memory pages lying wholly inside ``tensor``."""
    page = mmap.PAGESIZE
    start = tensor.data_ptr()
    end = start + tensor.numel() * tensor.element_size()
    return -(-start // page) * page, end // page * page


def _unwritten(first: int, last: int) -> bool:
    """Whether no page in ``[first, last)`` of a private file mapping was written (Linux
    ``/proc/self/pagemap``: a written page became anonymous); False when it cannot tell."""
    page = mmap.PAGESIZE
    try:
        with open("/proc/self/pagemap", "rb") as f:
            f.seek(first // page * 8)
            entries = f.read((last - first) // page * 8)
    except OSError:
        return False
    if len(entries) != (last - first) // page * 8:
        return False
    present, file_page = 1 << 63, 1 << 61
    return all(not (e & present) or (e & file_page) for (e,) in struct.iter_unpack("<Q", entries))


def _give_back_pages(weight: torch.Tensor, mapped, in_use: bool = False) -> None:
    """Return the memory pages of a packed layer's old weight when it lies in a mapped checkpoint file.

    transformers leaves a model's weights as views of the mapped safetensors file (the
    LoRA merge writes into private copies of its pages), and the mapping, with every
    page touched, lives as long as any view does (the embedding is one): packed, a
    SmolLM2 held its old weights too, 0.6 GB. The pages lying wholly inside a weight
    hold nothing else; once the packed copy exists nobody reads a dead weight again, so
    ``madvise(MADV_DONTNEED)`` drops them. A weight still ``in_use`` (the embedding an LM
    head is tied to, whose packing read all of it: 113 MB) is dropped only where the file
    holds it as it is: its next reads fault those pages back from the file."""
    if not mapped or not weight.is_contiguous():
        return
    first, last = _page_span(weight)
    if last <= first or not any(lo <= first and last <= hi for lo, hi in mapped):
        return
    if in_use and not _unwritten(first, last):
        return
    ctypes.CDLL(None).madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), _MADV_DONTNEED)
