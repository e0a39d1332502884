#!/bin/bash
# d2t-metrics GPU check (issue #35), the generative two: fact_accuracy and data_questeval through the command
# line on WebNLG 2017 outputs (the robustness benchmark's fixed sample), at their default batch size and at a
# GPU-sized one, each with --timing; the first run of each under cProfile (where the Python time goes while
# the GPU waits), nvidia-smi's utilization sampled every second. Every result lands in $OUT as it comes:
#   <metric>_b<B>.jsonl (per-example output), .err (timing, log), .prof.txt (cProfile, top 40), gpu_util.csv,
#   compare.txt (outputs identical across batch sizes? outputs/s of each run).
#   OUT=$OUT [N_FACT=1000 N_DQ=200 FACT_BATCHES="1024 256" DQ_BATCHES="256 1024" RUN_S=150 PROFILE_METRICS=...] bash benchmarks/gpu/generative.sh
# (fact_accuracy defaults to 1,024 a batch on a GPU, data_questeval to 256: RESULTS.md gpu_checks)
set -u
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
need_stream t; need_stream g
N_FACT=${N_FACT:-1000}; N_DQ=${N_DQ:-200}; RUN_S=${RUN_S:-150}
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 1 > "$OUT/gpu_util.csv" 2>&1 &
SMI=$!
for n in "$N_FACT" "$N_DQ"; do
  [ -f "/tmp/webnlg_$n.jsonl" ] || python3 -c "from benchmarks.generation_speed import webnlg_lines; print('\n'.join(webnlg_lines($n)))" > "/tmp/webnlg_$n.jsonl"
done
score() {  # metric n batch [profile]
  local m=$1 n=$2 b=$3 prof=${4:-} t=$(date +%s)
  local cmd=(-m d2t_metrics.cli score --metrics "$m" --input "/tmp/webnlg_$n.jsonl" --output "$OUT/${m}_b$b.jsonl" --overwrite
             --no-progress --timing --batch-size "$b" --block-lines 0)
  el "$m: $n outputs, batch $b${prof:+, under cProfile}"
  if [ -n "$prof" ]; then
    timeout "$RUN_S" python3 -m cProfile -o "/tmp/${m}_b$b.prof" "${cmd[@]}" > "$OUT/${m}_b$b.out" 2> "$OUT/${m}_b$b.err"
    python3 -c "import pstats; pstats.Stats('/tmp/${m}_b$b.prof').sort_stats('tottime').print_stats(40)" > "$OUT/${m}_b$b.prof.txt" 2>&1
  else
    timeout "$RUN_S" python3 "${cmd[@]}" > "$OUT/${m}_b$b.out" 2> "$OUT/${m}_b$b.err"
  fi
  local rc=$? s=$(( $(date +%s) - t ))
  echo "$m batch $b: exit $rc, $n outputs in $s s wall (with loading and imports)" | tee -a "$OUT/compare.txt"
  grep -E "compute|load|questions|extraction|QA" "$OUT/${m}_b$b.err" | head -12 | tee -a "$OUT/compare.txt"
}
# PROFILE_METRICS: the metrics whose first run goes under cProfile
PROFILE_METRICS=" ${PROFILE_METRICS:-fact_accuracy data_questeval} "
first=1; [[ "$PROFILE_METRICS" == *" fact_accuracy "* ]] || first=
for b in ${FACT_BATCHES:-1024 256}; do score fact_accuracy "$N_FACT" "$b" ${first:+profile}; first=; done
first=1; [[ "$PROFILE_METRICS" == *" data_questeval "* ]] || first=
for b in ${DQ_BATCHES:-256 1024}; do score data_questeval "$N_DQ" "$b" ${first:+profile}; first=; done
python3 - "$OUT" <<'PY' | tee -a "$OUT/compare.txt"
import glob, json, os, sys
out = sys.argv[1]
for metric in ("fact_accuracy", "data_questeval"):
    runs = sorted(glob.glob(os.path.join(out, f"{metric}_b*.jsonl")))
    lines = {os.path.basename(r): open(r, encoding="utf-8").read().splitlines() for r in runs}
    if len(lines) > 1:
        (a, la), (b, lb) = list(lines.items())[:2]
        same = sum(x == y for x, y in zip(la, lb))
        print(f"{metric}: {a} vs {b}: {same} of {max(len(la), len(lb))} output lines identical")
PY
kill $SMI 2>/dev/null
el "done"
