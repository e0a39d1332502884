"""What one greedy decoding step of the project's loop costs under each attention kernel.

    python -m benchmarks.decode_step_probe [--checkpoint checkpoints/fact_accuracy/triples] [--device cuda]
        [--rows 256,32] [--new-tokens 48] [--modes sdpa,sdpa-nocudnn,sdpa-math,eager,hf-static] [--drafts 0,6]
        [--profile] [--out FILE.jsonl]

Issue #35: on a lent H200 fact_accuracy decoded at about 100 ms a step with the GPU at most 9 % busy,
and a cProfile put the host's time in ``scaled_dot_product_attention`` (4.2 ms a call). This probe
needs only the generator (transformers, PEFT, the SmolLM2 base: stream t of ``benchmarks/gpu``), not
a metric: it runs :func:`d2t_metrics.decoding.greedy_continuations` on ``rows`` synthetic prompts
that share an instruction (as a metric's do) with no stop token, so every mode decodes exactly
``new_tokens`` steps, and reports ms per step, the forward calls, and how many continuations equal
those of the first mode (a kernel changes the rounding, so bf16 continuations may part).

Modes: ``sdpa`` (torch's choice of kernel), ``sdpa-nocudnn`` (torch's cuDNN attention switched off,
the others kept: what the loop itself now chooses on CUDA, ``decoding.CUDA_SDPA_BACKENDS``; here the
mode replaces that choice), ``sdpa-math`` / ``sdpa-efficient`` / ``sdpa-flash`` (one backend only),
``eager`` (transformers' matmul-softmax attention), and ``hf-static``: transformers' own ``generate``
with a static cache on left-padded batches, which it compiles (CUDA graphs) on a GPU, timed on its
second identical call: the floor a fixed-shape step reaches, for the step this loop takes. ``--drafts``
runs the loop's modes with that many tokens drafted a row (``draft_tokens``; synthetic prompts and
no stop token, so this times a draft's cost more than its gain). ``--profile`` adds torch's profiler
over the first mode's run (its top operators by host and by device time). Each record is appended
to ``--out`` as it comes. Nothing here is a test of speed: it is read by a person, on the machine
that matters.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = ("the river flows through a city of old stone bridges and the museum opened in spring while "
         "an airport serves the region with flights to the capital whose mayor was born in a small "
         "village near the coast where fishermen sell their catch").split()


def synthetic_prompts(tokenizer, n: int, seed: int = 0):
    """``n`` distinct chat prompts of 30-90 words after a shared instruction, as token ids."""
    rng = random.Random(seed)
    prompts = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 90))) + f" ({i})."
        messages = [{"role": "user", "content": "List every fact this text states as subject | predicate | object "
                                                 "triples, one per line.\n\nText: " + text}]
        prompts.append(tuple(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                           return_dict=False)))
    return prompts


def attention_mode(model, mode: str):
    """A context running ``model`` with the attention ``mode`` (module docstring)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    impl = "eager" if mode == "eager" else "sdpa"
    setter = getattr(model, "set_attn_implementation", None)
    if setter is not None:
        setter(impl)
    else:
        model.config._attn_implementation = impl
    if mode in ("sdpa", "eager"):
        return contextlib.nullcontext()
    if mode == "sdpa-nocudnn":
        backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    else:
        backends = [{"sdpa-math": SDPBackend.MATH, "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
                     "sdpa-flash": SDPBackend.FLASH_ATTENTION}[mode]]
    del torch
    return sdpa_kernel(backends)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default=os.path.join(ROOT, "checkpoints", "fact_accuracy", "triples"))
    parser.add_argument("--device", default=None)
    parser.add_argument("--rows", default="256,32", help="prompts per run (one batch each), comma-separated")
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--modes", default="sdpa-nocudnn,sdpa,eager", help="add hf-static where a minute of compiling is affordable")
    parser.add_argument("--drafts", default="0", help="tokens drafted a row and step, comma-separated (0: none)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    import torch

    from d2t_metrics import decoding
    from d2t_metrics.decoding import greedy_continuations
    from d2t_metrics.generator import _pad_id, load_generator
    from d2t_metrics.models import get_device

    decoding.decoding_attention = lambda device: contextlib.nullcontext()  # each mode chooses the kernels itself

    device = get_device(args.device)
    started = time.perf_counter()
    tokenizer, model, _ = load_generator(args.checkpoint, device=device)
    base = getattr(model, "model", model)
    calls = [0]
    base.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    print(f"loaded in {time.perf_counter() - started:.1f} s on {device}, dtype {next(model.parameters()).dtype}, "
          f"torch {torch.__version__}", flush=True)

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def record(row):
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")

    def timed(prompts, rows, new_tokens, draft=0):
        calls[0] = 0
        t0 = time.perf_counter()
        out = greedy_continuations(model, prompts, new_tokens, [], _pad_id(tokenizer), batch_size=rows, show_progress=False,
                                   draft_tokens=draft)
        sync()
        return out, time.perf_counter() - t0

    def hf_static(prompts, new_tokens):
        """transformers' generate, static cache, left-padded: its continuations and the second call's seconds."""
        width = max(map(len, prompts))
        ids = torch.tensor([[_pad_id(tokenizer)] * (width - len(p)) + list(p) for p in prompts], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
        options = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, num_beams=1,
                       cache_implementation="static", pad_token_id=_pad_id(tokenizer))
        for _ in range(2):  # the first call compiles (on a GPU), the second is timed
            calls[0] = 0
            t0 = time.perf_counter()
            out = model.generate(input_ids=ids, attention_mask=mask, **options)
            sync()
        return [row[width:] for row in out.tolist()], time.perf_counter() - t0

    modes = args.modes.split(",")
    drafts = [int(d) for d in args.drafts.split(",")]
    for rows in [int(r) for r in args.rows.split(",")]:
        prompts = synthetic_prompts(tokenizer, rows)
        first = None
        for mode in modes:
            for draft in ([0] if mode == "hf-static" else drafts):
                try:
                    with attention_mode(model, "sdpa-nocudnn" if mode == "hf-static" else mode), torch.inference_mode():
                        if mode == "hf-static":
                            out, wall = hf_static(prompts, args.new_tokens)
                        else:
                            timed(prompts[:8], rows, 4, draft)  # warm-up: kernels chosen, memory pools filled
                            out, wall = timed(prompts, rows, args.new_tokens, draft)
                except Exception as error:  # a backend this machine cannot run: say so, go on
                    record({"rows": rows, "mode": mode, "draft_tokens": draft,
                            "error": f"{type(error).__name__}: {str(error)[:300]}"})
                    continue
                first = out if first is None else first
                same = sum(a == b for a, b in zip(first, out))
                record({"rows": rows, "mode": mode, "draft_tokens": draft, "new_tokens": args.new_tokens,
                        "wall_s": round(wall, 3), "forward_calls": calls[0],
                        "ms_per_step": round(1000 * wall / args.new_tokens, 2), "rows_per_s": round(rows / wall, 1),
                        "same_as_first_mode": f"{same}/{rows}", "prompt_tokens_mean": round(sum(map(len, prompts)) / rows, 1)})
        if args.profile:  # after the timings, which the profiler would slow down
            activities = [torch.profiler.ProfilerActivity.CPU] + (
                [torch.profiler.ProfilerActivity.CUDA] if device.startswith("cuda") else [])
            loop_mode = next((m for m in modes if m != "hf-static"), "sdpa-nocudnn")
            with attention_mode(model, loop_mode), torch.inference_mode(), torch.profiler.profile(activities=activities) as prof:
                timed(prompts, rows, min(args.new_tokens, 16))
            table = prof.key_averages()
            for key in ("self_cpu_time_total", "self_device_time_total"):
                top = sorted(table, key=lambda e: getattr(e, key, 0) or 0, reverse=True)[:15]
                record({"rows": rows, "mode": loop_mode, "profiled_steps": min(args.new_tokens, 16), "top_by": key, "ops": [
                    [e.key, e.count, round(e.self_cpu_time_total / 1000, 1),
                     round((getattr(e, "self_device_time_total", 0) or 0) / 1000, 1)] for e in top]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
