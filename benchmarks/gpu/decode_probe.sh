#!/bin/bash
# d2t-metrics GPU check (issue #35): where a decoding step's time goes, alone on the GPU. torch's profiler over
# fact_accuracy (SDPA, then eager attention) and data_questeval (`python -m benchmarks.decode_profile`), each
# within PROBE_S seconds; the JSON records and operator tables land in $OUT/decode_probe.tar after each run.
#   OUT=$OUT [N_FACT=100 N_DQ=20 FACT_BATCH=256 DQ_BATCH=128 PROBE_S=120] bash benchmarks/gpu/decode_probe.sh
set -u
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
need_stream t; need_stream g
R=/tmp/decode_probe; rm -rf $R; mkdir -p $R
probe() {  # metric n batch attn
  el "decode_profile $1, $2 outputs, batch $3, $4 attention"
  timeout "${PROBE_S:-120}" python3 -m benchmarks.decode_profile --metric "$1" --webnlg "$2" --batch-size "$3" --attn "$4" \
    --out $R > $R/$1_$4.log 2>&1
  echo "exit $?"; head -c 1500 $R/$1_$4.log; echo
  (cd $R && tar cf "$OUT/decode_probe.tar" .)
}
probe fact_accuracy "${N_FACT:-100}" "${FACT_BATCH:-256}" sdpa
probe fact_accuracy "${N_FACT:-100}" "${FACT_BATCH:-256}" eager
probe data_questeval "${N_DQ:-20}" "${DQ_BATCH:-128}" sdpa
el "done"
