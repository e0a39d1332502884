#!/usr/bin/env bash
# Train the DAE arc classifier over SmolLM2-135M-Instruct on one GPU, in under 280 s in all.
#
#   BASE_DIR=/path/to/SmolLM2-folder bash benchmarks/gpu/train_dae_decoder.sh OUT_DIR
#
# Run from anywhere (it cds to the repository root); the data files (made by `python -m training.dae.train_decoder prepare`, see benchmarks/gpu/README.md) are read from $STAGE_DAE (default .stage_dae). BASE_DIR: a transformers folder
# of the base (config.json, model.safetensors, tokenizer files), e.g. what
#   python -c 'from d2t_metrics.bases import resolve_base; print(resolve_base("HuggingFaceTB/SmolLM2-135M-Instruct"))'
# prints (~/.cache/huggingface/d2t_metrics/bases/SmolLM2-135M-Instruct-<hash>); without BASE_DIR that call is
# made here. Leaves the checkpoint in OUT_DIR/dae_decoder (saved every 60 s and at the end, so a killed run
# still leaves one) and the log in OUT_DIR/train_log.txt. For a CPU dry run: DEVICE=cpu EXTRA_ARGS="--max-steps 5
# --batch-size 4 --max-dev 40 --eval-examples 20" (later flags override the ones above).
set -x
START=$SECONDS
OUT="${1:?usage: BASE_DIR=... bash benchmarks/gpu/train_dae_decoder.sh OUT_DIR}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
STAGE_DAE="${STAGE_DAE:-.stage_dae}"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
date -u
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv || true
ls -la "$STAGE_DAE"
if [ -z "${BASE_DIR:-}" ]; then
  BASE_DIR="$(timeout 60 python -c 'from d2t_metrics.bases import resolve_base; print(resolve_base("HuggingFaceTB/SmolLM2-135M-Instruct"))' | tail -1)"
fi
echo "BASE_DIR=$BASE_DIR"
ls -la "$BASE_DIR" || true
# Batches of 128 (BATCH), not the first run's 32: that run did 100 examples/s with the GPU 10-30 % busy, since a
# step of the LoRA'd 30-layer model is some 15,000 small kernels whatever the batch (a CPU-side bound); four times
# the examples per step at the same step rate is 3 epochs of 36,000 in about 4.5 minutes. Learning rates doubled
# for the larger batch (LR, HEAD_LR).
# versions (the training prints them again, with the device)
timeout 60 python -c 'import sys, torch, transformers, peft, safetensors; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available(), "transformers", transformers.__version__, "peft", peft.__version__, "safetensors", safetensors.__version__)'
LEFT=$(( 278 - (SECONDS - START) ))
# 230 s of training budget, less whatever the steps above took past 30 s (a base converted here, a slow start)
BUDGET=$(( LEFT - 18 < 230 ? LEFT - 18 : 230 ))
echo "seconds left $LEFT, training budget $BUDGET"
# the training's own budget (230 s from its start, final evaluation and save included) ends well before the timeout;
# on the timeout's SIGTERM it stops after the current step and saves
timeout -k 8 "$LEFT" python -m training.dae.train_decoder train \
  --data "$STAGE_DAE/train.jsonl.gz" --dev "$STAGE_DAE/dev.jsonl.gz" \
  --base "$BASE_DIR" --base-id HuggingFaceTB/SmolLM2-135M-Instruct \
  --out "$OUT/dae_decoder" --device "${DEVICE:-cuda}" --bf16 --max-seconds "$BUDGET" \
  --batch-size "${BATCH:-128}" --eval-batch-size 128 --lr "${LR:-4e-4}" --head-lr "${HEAD_LR:-4e-3}" --warmup-steps 30 \
  --max-length 320 --save-every 60 --eval-points 0.33,0.66 --eval-examples 1000 --epochs 3 \
  --dump-probs "$OUT/dev_probs.json" ${EXTRA_ARGS:-} 2>&1 | tee "$OUT/train_log.txt"
RC=${PIPESTATUS[0]}
ls -la "$OUT" "$OUT/dae_decoder" || true
du -sh "$OUT/dae_decoder" || true
echo "exit $RC after $(( SECONDS - START )) s"
exit "$RC"
