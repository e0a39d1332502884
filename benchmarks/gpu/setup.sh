# Sourced by the GPU scripts (bench.sh, generative.sh, dae_decoder.sh, dae_train_bg.sh, final.sh) on the lent
# machine: unpack each stream stage.sh made (pieces t-NN-of-MM and g-NN-of-MM, carried to /tmp/stage/) once all
# its pieces are there, install its wheels into /tmp/site once, put the checkpoints back (they travel in stream g,
# README.md step 2), and set the environment. Defines `el` (elapsed-time log lines) and `need_stream`.
# `python` for the scripts that call it: a wrapper, not a link (a link to a virtual environment's python3 starts
# Python outside that environment)
mkdir -p /tmp/bin && printf '#!/bin/sh\nexec "%s" "$@"\n' "$(command -v python3)" > /tmp/bin/python && chmod +x /tmp/bin/python
export PATH=/tmp/bin:$PATH
OUT=${OUT:?set OUT to the run tool folder \$OUT}
T0=${T0:-$(date +%s)}
el() { echo "[gpu +$(( $(date +%s) - T0 ))s] $*"; }
install_stream() {  # t or g: returns 1 while pieces are missing
  local s=$1 first total have
  [ -f /tmp/site/.ready_$s ] && return 0
  first=$(ls /tmp/stage/$s-00-of-* 2>/dev/null | head -1)
  [ -n "$first" ] || return 1
  total=$((10#${first##*-of-})); have=$(ls /tmp/stage/$s-*-of-* | wc -l)
  [ "$have" -eq "$total" ] || { el "stream $s: $have of $total pieces"; return 1; }
  el "stream $s: unpack and install"
  mkdir -p /tmp/stage/x /tmp/site
  cat /tmp/stage/$s-*-of-* | tar xf - -C /tmp/stage/x || { el "tar failed"; ls -la /tmp/stage; exit 3; }
  [ -n "${SKIP_PIP:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site /tmp/stage/x/whl_$s/*.whl 2>&1 | grep -v "WARNING: Target directory" | tail -3
  touch /tmp/site/.ready_$s
  el "stream $s ready"
}
need_stream() { install_stream "$1" || { el "stream $1 incomplete: carry its other pieces first"; exit 4; }; }
install_stream t || true
install_stream g || true
if [ -d /tmp/stage/x/checkpoints ] && [ ! -f checkpoints/dae/adapter_model.safetensors ]; then
  rm -rf checkpoints; cp -r /tmp/stage/x/checkpoints .
fi
# (a dry run on a machine that has the environment: touch /tmp/site/.ready_t /tmp/site/.ready_g and set
# D2T_SHARED, D2T_METRICS_CACHE)
export TQDM_DISABLE=1 PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false \
  D2T_SHARED=${D2T_SHARED:-/tmp/stage/x/shared} D2T_METRICS_CACHE=${D2T_METRICS_CACHE:-/tmp/d2tcache}
