#!/bin/bash
# d2t-metrics GPU run, second half (issues #35, #36), after dae_train_bg.sh and the pieces of stream g: wait for
# the DAE decoder training, bring its checkpoint back ($OUT/dae_decoder.tgz), then, while BUDGET_S seconds last:
# generative.sh (fact_accuracy and data_questeval through the command line), the summary reranking with the new
# checkpoint and with checkpoints/dae, and WebNLG 2017 with the new checkpoint. Everything else lands in
# $OUT/results.tar, rewritten after each step, so a run stopped at its limit still returns what it finished.
set -u
export T0=$(date +%s)
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
need_stream t; need_stream g
R=/tmp/final; rm -rf $R; mkdir -p $R
pack() { (cd $R && tar cf "$OUT/results.tar" .); }
DEADLINE=$(( T0 + ${BUDGET_S:-420} ))
left() { echo $(( DEADLINE - $(date +%s) )); }
# (no training started, as in a session that only measures: no wait)
while [ -f /tmp/dae_work/bg.log ] && [ ! -f /tmp/dae_work/exit ] && [ "$(left)" -gt "${KEEP_S:-200}" ]; do sleep 3; done
el "training exit $(cat /tmp/dae_work/exit 2>/dev/null || echo 'not done')"; tail -4 /tmp/dae_work/bg.log
cp /tmp/dae_work/bg.log /tmp/dae_work/gpu_util.csv $R/ 2>/dev/null
CK=/tmp/dae_work/dae_decoder
[ -f /tmp/dae_work/bg.log ] || CK=/nonexistent  # a checkpoint only where this machine trained one
[ -f $CK/d2t_config.json ] && (cd /tmp/dae_work && tar czf "$OUT/dae_decoder.tgz" dae_decoder train_log.txt $(ls dev_probs.json 2>/dev/null))
pack
if [ "$(left)" -gt 150 ]; then
  mkdir -p $R/gen
  OUT=$R/gen N_FACT=${N_FACT:-500} N_DQ=${N_DQ:-100} FACT_BATCHES=${FACT_BATCHES:-1024} DQ_BATCHES=${DQ_BATCHES:-256} \
    RUN_S=${RUN_S:-90} PROFILE_METRICS=${PROFILE_METRICS:-fact_accuracy} bash benchmarks/gpu/generative.sh 2>&1 | tee $R/gen/log.txt
  pack
fi
# NLI_EXAMPLES: also time NLI against its one-pair loops on that many WebNLG outputs (each path's first round beside
# its best, and a path without cuDNN's attention; 420 outputs took more than 75 s on the H200)
if [ -n "${NLI_EXAMPLES:-}" ] && [ "$(left)" -gt 100 ]; then
  el "nli_speed, $NLI_EXAMPLES outputs"
  timeout $(( $(left) - 40 )) python3 -m benchmarks.nli_speed --data webnlg --examples "$NLI_EXAMPLES" --threads 16 --repeats 2 \
    --no-write 2>&1 | grep -v "it/s" | tail -24 | tee $R/nli_speed.log
  pack
fi
[ -f /tmp/stage_dae/summary_pairs.json ] && mkdir -p "$D2T_SHARED/data/dae" && cp /tmp/stage_dae/summary_pairs.json "$D2T_SHARED/data/dae/"
# RERANK_MODELS: which checkpoints rerank the summary pairs (default: the new one and checkpoints/dae; empty: none)
for m in ${RERANK_MODELS-$CK checkpoints/dae}; do
  [ -d "$m" ] && [ "$(left)" -gt 45 ] || continue
  el "rerank $m"
  { echo "== $m"; timeout 60 python3 -m benchmarks.dae_rerank --model $m --device ${DEVICE:-cuda} --no-write 2>&1 | tail -8; } | tee -a $R/rerank.log
  pack
done
if [ -f $CK/d2t_config.json ] && [ "$(left)" -gt 70 ]; then
  el "webnlg with $CK"
  timeout $(( $(left) - 10 )) python3 -m benchmarks.run --metrics dae --datasets webnlg --model dae=$CK --device ${DEVICE:-cuda} \
    --out /tmp/runout --no-plots --no-tracemalloc --bootstrap 200 --system-bootstrap 100 > $R/webnlg.log 2>&1
  tail -5 $R/webnlg.log; (cd /tmp/runout/meta_eval 2>/dev/null && tar cf $R/webnlg_meta.tar .)
  pack
fi
el "done"
