#!/bin/bash
# d2t-metrics GPU run (issue #36): train the decoder-backbone DAE arc scorer, then score the
# summary reranking pairs and WebNLG 2017 with it and with the MiniLM checkpoint, same machine.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
need_stream t; need_stream g
mkdir -p /tmp/stage/x/shared/data/dae && cp .stage_dae/summary_pairs.json /tmp/stage/x/shared/data/dae/ 2>/dev/null
export BASE_DIR=$(python3 -c 'from d2t_metrics.bases import resolve_base; print(resolve_base("HuggingFaceTB/SmolLM2-135M-Instruct"))' 2>/dev/null | tail -1)
el "base $BASE_DIR"
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 2 > /tmp/dae_util.csv 2>&1 &
SMI=$!
el "train"
# INIT: a checkpoint an earlier session trained (its dae_decoder.tar, unpacked), which this run continues
EXTRA_ARGS="--max-seconds ${TRAIN_S:-180}${INIT:+ --init $INIT}" timeout ${TRAIN_TOTAL_S:-270} bash benchmarks/gpu/train_dae_decoder.sh /tmp/dae_work > $OUT/train.log 2>&1
el "train exit $?"; tail -15 $OUT/train.log
CK=/tmp/dae_work/dae_decoder
[ -f $CK/d2t_config.json ] && (cd /tmp/dae_work && tar cf $OUT/dae_decoder.tar dae_decoder) && ls -la $CK
el "rerank"
{ for m in $CK checkpoints/dae; do echo "== $m"; timeout ${RERANK_S:-50} python3 -m benchmarks.dae_rerank --model $m --device cuda --no-write 2>&1 | tail -8; done; } | tee $OUT/rerank.log
el "webnlg"
timeout ${WEBNLG_S:-90} python3 -m benchmarks.run --metrics dae --datasets webnlg --model dae=$CK --device cuda --out /tmp/runout \
  --no-plots --no-tracemalloc --bootstrap 200 --system-bootstrap 100 > $OUT/webnlg.log 2>&1; tail -5 $OUT/webnlg.log
(cd /tmp/runout/meta_eval 2>/dev/null && tar cf $OUT/webnlg_meta.tar .)
kill $SMI; cp /tmp/dae_util.csv $OUT/gpu_util_dae.csv
el "done"
