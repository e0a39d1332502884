#!/bin/bash
# d2t-metrics GPU check (issue #35): unpack the staged bases and wheels, then profile the model-based
# metrics on cuda and time NLI against its one-pair loop. Partial results land in $OUT as they come.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
need_stream t; need_stream g
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
# 200 outputs, 2 rounds: 420 outputs took more than 75 s on the H200 (the one-pair loops), 2026-11-30
timeout ${NLI_S:-120} python3 -m benchmarks.nli_speed --data webnlg --examples ${NLI_EXAMPLES:-200} --threads 16 --repeats 2 2>&1 | grep -v "it/s" | tail -30 | tee $OUT/nli_speed.log
cp benchmarks/RESULTS.md $OUT/RESULTS_after.md 2>/dev/null
kill $SMI
el "done"
