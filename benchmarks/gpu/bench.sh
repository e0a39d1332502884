#!/bin/bash
# d2t-metrics GPU check (issue #35): unpack the staged bases and wheels, then profile the model-based
# metrics on cuda and time NLI against its one-pair loop. Partial results land in $OUT as they come.
set -u
mkdir -p /tmp/bin && ln -sf "$(command -v python3)" /tmp/bin/python && export PATH=/tmp/bin:$PATH
OUT=${OUT:?}
T0=$(date +%s)
el() { echo "[gpu_bench +$(( $(date +%s) - T0 ))s] $*"; }
mkdir -p /tmp/stage/x /tmp/site
el "unpack"
cat /tmp/stage/part-0* | tar xf - -C /tmp/stage/x || { el "tar failed"; ls -la /tmp/stage; exit 3; }
[ -n "${SKIP_PIP:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site /tmp/stage/x/whl/*.whl 2>&1 | grep -v "WARNING: Target directory" | tail -3
cp -r /tmp/stage/x/site/* /tmp/site/
[ -f checkpoints/dae/adapter_model.safetensors ] || { rm -rf checkpoints; cp -r /tmp/stage/checkpoints .; }  # see README.md: staged apart 
export TQDM_DISABLE=1 PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 D2T_SHARED=/tmp/stage/x/shared D2T_METRICS_CACHE=/tmp/d2tcache TOKENIZERS_PARALLELISM=false
el "imports"
python3 - <<'PY' 2>&1 | tee $OUT/env.txt
import sys, torch, transformers, peft, spacy, evaluate, gguf, datasets, pyarrow
print(sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__,
      "spacy", spacy.__version__, "evaluate", evaluate.__version__, "datasets", datasets.__version__, "pyarrow", pyarrow.__version__)
print("gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none", "threads", torch.get_num_threads())
import time; t = time.time()
from d2t_metrics.bases import resolve_base, load_spacy
print("smollm2", resolve_base("HuggingFaceTB/SmolLM2-135M-Instruct"), f"{time.time()-t:.1f}s")
print("minilm", resolve_base("sentence-transformers/all-MiniLM-L6-v2"))
print("spacy", load_spacy().meta["name"])
PY
el "profile"
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 1 > $OUT/gpu_util.csv 2>&1 &
SMI=$!
mkdir -p /tmp/gpubench/meta_eval && cp benchmarks/meta_eval/profile.json /tmp/gpubench/meta_eval/ && cp benchmarks/RESULTS.md /tmp/gpubench/
timeout ${PROFILE_S:-170} python3 -m benchmarks.profile --device ${DEVICE:-cuda} --webnlg ${WEBNLG_N:-400} --no-cli \
  --metrics ${METRICS:-nli_semantic_accuracy,dae,fact_accuracy,data_questeval} --out /tmp/gpubench 2>&1 | grep -v "it/s\]\|s/it\]" | tee $OUT/profile.log | tail -40
cp /tmp/gpubench/meta_eval/profile.json $OUT/profile.json
el "nli_speed"
timeout ${NLI_S:-60} python3 -m benchmarks.nli_speed --data webnlg --examples 420 --threads 16 2>&1 | tail -25 | tee $OUT/nli_speed.log
cp benchmarks/RESULTS.md $OUT/RESULTS_after.md 2>/dev/null
kill $SMI
el "done"
