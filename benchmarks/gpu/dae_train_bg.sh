#!/bin/bash
# d2t-metrics GPU run (issue #36), first half: start the DAE decoder training (train_dae_decoder.sh) in a process
# session of its own and return at once, so that the next calls carry stream g while it trains (the run tool
# keeps a setsid process running while the machine is held). Needs stream t and `carry: [".stage_dae"]`.
# It trains from copies in /tmp (the next calls re-sync the checkout, and .stage_dae is not carried again).
# Progress: /tmp/dae_work/bg.log; /tmp/dae_work/exit holds the exit status once it is done; final.sh collects it.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
need_stream t
rm -rf /tmp/repo /tmp/dae_work && mkdir -p /tmp/repo /tmp/dae_work /tmp/stage_dae
tar --exclude=./.git --exclude=./.stage --exclude=./.stage_dae -cf - . | tar xf - -C /tmp/repo
cp .stage_dae/*.jsonl.gz .stage_dae/summary_pairs.json /tmp/stage_dae/
[ -n "${INIT_TAR:-}" ] && mkdir -p /tmp/dae_init && tar xf "$INIT_TAR" -C /tmp/dae_init
cd /tmp/repo
export PYTHONPATH=/tmp/site:/tmp/repo STAGE_DAE=/tmp/stage_dae
setsid nohup bash -c '
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 2 > /tmp/dae_work/gpu_util.csv 2>&1 &
  SMI=$!
  EXTRA_ARGS="${EXTRA_ARGS:-}${INIT_TAR:+ --init /tmp/dae_init/dae_decoder}" timeout -k 10 300 bash benchmarks/gpu/train_dae_decoder.sh /tmp/dae_work > /tmp/dae_work/bg.log 2>&1
  echo $? > /tmp/dae_work/exit
  kill $SMI' > /dev/null 2>&1 < /dev/null &
el "training started in the background"
sleep ${WATCH_S:-8}
tail -5 /tmp/dae_work/bg.log
