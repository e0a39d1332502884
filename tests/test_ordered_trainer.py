"""The NLI and DAE trainers on transformers' Trainer do what their hand-written
loops did: the same batches in the same order for a seed (across epochs), the
same learning rates, and so the same losses and weights after a few steps.

Each test keeps a minimal copy of the old loop (its optimizer, schedule,
clipping and step order, over the batch-order function both share) and runs it and
the Trainer from the same weights and the same torch RNG state on a tiny
random encoder, with dropout on, so the RNG stream matters too."""

import copy
import random

import pytest

torch = pytest.importorskip("torch")

from d2t_metrics.checkpoints import apply_lora, build_base_model
from metrics.dae.arcs import ARC_FEATURES, RELATIONS
from metrics.dae.model import CHECKPOINT_TASK, make_arc_head
from training.dae.train import ArcModel, arc_batch, batch_order, dae_trainer, encoder_only_logits
from training.nli_semantic_accuracy.train import bucketed_batches, collate, encode, encoded_rows, nli_trainer
from training.nli_semantic_accuracy.nli_data import LABELS, Pair

WORDS = "the a city country airport restaurant food price range area near family friendly coffee shop pub river born".split()
LORA = {"r": 2, "lora_alpha": 4, "lora_dropout": 0.1, "target_modules": ["query", "value"]}


def _trainable(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def _recording(trainer, rows):
    """Wraps the trainer's collator to record the index of every item it batches."""
    seen, collate_fn = [], trainer.data_collator
    position = {id(r): i for i, r in enumerate(rows)}

    def record(batch):
        seen.append([position[id(r)] for r in batch])
        return collate_fn(batch)

    trainer.data_collator = record
    return seen


def _assert_same_run(ref_batches, ref_losses, ref_params, batches, trainer, params):
    """Bit-identical on CPU: the same batches, the same loss at every step, the same weights."""
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert batches == ref_batches  # the same examples, in the same order
    assert losses == ref_losses
    for name, value in ref_params.items():
        assert torch.equal(params[name], value), name


# ---------------------------------------------------------------- NLI


def old_nli_loop(model, rows, pad_id, total, batch_size, lr, warmup, seed):
    """The hand-written loop the Trainer replaced (no time budget)."""
    lengths = [len(r["input_ids"]) for r in rows]
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.01)
    warm = max(1, int(warmup * total))
    model.train()
    step, epoch, seen, losses = 0, 0, [], []
    while step < total:
        for batch in bucketed_batches(lengths, batch_size, random.Random(seed + epoch)):
            if step >= total:
                break
            for group in opt.param_groups:
                group["lr"] = lr * (min((step + 1) / warm, 1.0) * max(0.0, 1.0 - min(1.0, step / total)))
            out = model(**collate([rows[i] for i in batch], pad_id))
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            step += 1
            seen.append(batch)
            losses.append(out.loss.item())
        epoch += 1
    return seen, losses


def _nli_pairs(n=22):
    rng = random.Random(7)
    text = lambda: " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12)))  # noqa: E731
    return [Pair(text(), text(), rng.randrange(3), "sick") for _ in range(n)]


def test_nli_trainer_visits_the_old_loops_batches_and_trains_alike(tiny_encoder, tmp_path):
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_encoder)
    rows = encoded_rows(*encode(tokenizer, _nli_pairs(), 48), [p.label for p in _nli_pairs()])
    meta = {"base": tiny_encoder, "task": "sequence-classification", "id2label": {str(i): l for i, l in enumerate(LABELS)}}
    torch.manual_seed(0)
    model = apply_lora(build_base_model(meta), LORA, trainable=("classifier",))
    start, rng_state = copy.deepcopy(model.state_dict()), torch.get_rng_state()
    # 22 pairs in batches of 4: 6 batches an epoch, so 9 steps cross into the second epoch
    settings = dict(total=9, batch_size=4, lr=2e-3, warmup=0.25, seed=5)
    ref_batches, ref_losses = old_nli_loop(model, rows, tokenizer.pad_token_id, **settings)
    ref_params = _trainable(model)

    model.load_state_dict(start)
    torch.set_rng_state(rng_state)
    trainer = nli_trainer(model, rows, pad_id=tokenizer.pad_token_id, device="cpu", work_dir=str(tmp_path), logging_steps=1, **settings)
    batches = _recording(trainer, rows)
    trainer.train()
    assert len(batches) == 9 and sorted(i for b in batches[:6] for i in b) == list(range(22))
    _assert_same_run(ref_batches, ref_losses, ref_params, batches, trainer, _trainable(model))


def test_nli_time_budget_decays_the_rate_and_stops_the_run(tiny_encoder, tmp_path):
    """--time-budget: the rate decays over the time as well as the steps, and the
    shared time-budget callback stops the run when the time is up."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_encoder)
    rows = encoded_rows(*encode(tokenizer, _nli_pairs(), 48), [p.label for p in _nli_pairs()])
    meta = {"base": tiny_encoder, "task": "sequence-classification", "id2label": {str(i): l for i, l in enumerate(LABELS)}}
    model = apply_lora(build_base_model(meta), LORA, trainable=("classifier",))
    trainer = nli_trainer(model, rows, pad_id=tokenizer.pad_token_id, total=9, batch_size=4, time_budget=1e-6, device="cpu",
                          work_dir=str(tmp_path))
    trainer.train()
    assert trainer.state.global_step == 1 and trainer.lr_scheduler.get_last_lr() == [0.0]


# ---------------------------------------------------------------- DAE


def old_make_batches(examples, batch_size, rng):
    """The old loop's batches: lists of examples, in the order the trainers share (batch_order)."""
    return [[examples[i] for i in batch] for batch in batch_order(examples, batch_size, rng)]


def old_dae_loop(encoder, head, tokenizer, train, rng, total, batch_size, lr, head_lr, max_length, neg_weight, encoder_loss):
    """The hand-written loop the Trainer replaced, its loss written out as it was."""
    encoder.train()
    head.train()
    params = [{"params": [p for p in encoder.parameters() if p.requires_grad], "lr": lr}, {"params": list(head.parameters()), "lr": head_lr}]
    opt = torch.optim.AdamW(params, weight_decay=0.0)
    warmup = max(1, int(0.05 * total))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(total - warmup, 1))))
    step, seen, losses = 0, [], []
    while step < total:
        for batch in old_make_batches(train, batch_size, rng):
            x = arc_batch(tokenizer, batch, max_length, with_features=True)
            enc = {k: x[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
            hidden = encoder(**enc).last_hidden_state
            logits = head(hidden[x["seg"], x["hpos"]], hidden[x["seg"], x["cpos"]], x["rels"], x["feats"])
            labels = x["labels"]
            weights = torch.where(labels > 0.5, torch.ones_like(labels), torch.full_like(labels, neg_weight))
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels, weight=weights)
            aux = encoder_only_logits(head, logits, x["feats"])
            loss = loss + encoder_loss * torch.nn.functional.binary_cross_entropy_with_logits(aux, labels, weight=weights)
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for g in params for p in g["params"]], 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            seen.append([id(e) for e in batch])
            losses.append(loss.item())
            if step >= total:
                break
    return seen, losses


def _dae_examples(n=18):
    rng = random.Random(3)
    out = []
    for k in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 9))]
        arcs = [[rng.randrange(len(words)), rng.randrange(len(words)), rng.choice(RELATIONS), rng.randrange(2)] for _ in range(rng.randint(1, 4))]
        out.append({"source": " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 16))), "hypothesis": " ".join(words),
                    "words": words, "arcs": arcs, "kind": "t", "group": str(k),
                    "feats": [[rng.random() for _ in ARC_FEATURES] for _ in arcs]})
    return out


def test_dae_trainer_visits_the_old_loops_batches_and_trains_alike(tiny_encoder, tmp_path):
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_encoder)
    train = _dae_examples()
    torch.manual_seed(0)
    encoder = apply_lora(build_base_model({"base": tiny_encoder, "task": CHECKPOINT_TASK}), LORA, trainable=())
    head = make_arc_head(encoder.config.hidden_size, num_features=len(ARC_FEATURES))
    start = copy.deepcopy((encoder.state_dict(), head.state_dict()))
    rng_state = torch.get_rng_state()
    # 18 examples in batches of 4: 5 batches an epoch, so 8 steps cross into the second epoch
    settings = dict(total=8, batch_size=4, lr=2e-3, head_lr=5e-3, max_length=48)
    ref_batches, ref_losses = old_dae_loop(encoder, head, tokenizer, train, random.Random(11), neg_weight=2.0, encoder_loss=0.5, **settings)
    ref_params = _trainable(ArcModel(encoder, head))

    encoder.load_state_dict(start[0])
    head.load_state_dict(start[1])
    torch.set_rng_state(rng_state)
    model = ArcModel(encoder, head, neg_weight=2.0, encoder_loss=0.5)
    trainer = dae_trainer(model, train, tokenizer, rng=random.Random(11), device="cpu", work_dir=str(tmp_path), logging_steps=1, **settings)
    batches = _recording(trainer, train)
    trainer.train()
    assert len(batches) == 8 and sorted(i for b in batches[:5] for i in b) == list(range(18))
    by_id = {id(e): i for i, e in enumerate(train)}
    _assert_same_run([[by_id[i] for i in b] for b in ref_batches], ref_losses, ref_params, batches, trainer, _trainable(model))
