# Sourced by the GPU scripts (bench.sh, generative.sh, dae_decoder.sh) on the lent machine: unpack the pieces
# stage.sh made (carried to /tmp/stage/), install the wheels into /tmp/site once, put the checkpoints back
# (staged apart, README.md step 2), and set the environment. Defines `el` (elapsed-time log lines).
mkdir -p /tmp/bin && ln -sf "$(command -v python3)" /tmp/bin/python && export PATH=/tmp/bin:$PATH
OUT=${OUT:?set OUT to the run tool folder \$OUT}
T0=${T0:-$(date +%s)}
el() { echo "[gpu +$(( $(date +%s) - T0 ))s] $*"; }
if [ ! -f /tmp/site/.d2t_ready ]; then
  el "unpack"
  mkdir -p /tmp/stage/x /tmp/site
  cat /tmp/stage/part-0* | tar xf - -C /tmp/stage/x || { el "tar failed"; ls -la /tmp/stage; exit 3; }
  [ -n "${SKIP_PIP:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site /tmp/stage/x/whl/*.whl 2>&1 | grep -v "WARNING: Target directory" | tail -3
  cp -r /tmp/stage/x/site/. /tmp/site/  # empty since stage.sh stages the bases as wheels
  touch /tmp/site/.d2t_ready
fi
[ -f checkpoints/dae/adapter_model.safetensors ] || { rm -rf checkpoints; cp -r /tmp/stage/checkpoints .; }
# (a dry run on a machine that has the environment: touch /tmp/site/.d2t_ready and set D2T_SHARED, D2T_METRICS_CACHE)
export TQDM_DISABLE=1 PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false \
  D2T_SHARED=${D2T_SHARED:-/tmp/stage/x/shared} D2T_METRICS_CACHE=${D2T_METRICS_CACHE:-/tmp/d2tcache}
