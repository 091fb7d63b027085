#!/usr/bin/env bash
# One short, prepared GPU session: the three checks a session lent a CUDA machine runs, each under its own
# time limit, so one failure does not cost the others. Run from the repository root:
#
#     bash benchmarks/gpu_session.sh OUT_DIR [WORLD_SIZE]
#
# 1. benchmarks/gpu_check.py: real single-GPU steps of the GPTs, the node profiler, the OOM recovery loop and a
#    short REINFORCE run, against the simulator (report: OUT_DIR/gpu_check_*.json);
# 2. a plan searched for WORLD_SIZE GPUs (bert-huge-32's published profile), run under torchrun with NCCL and
#    --check against the single-process reference (OUT_DIR/plan.json, OUT_DIR/run.json);
# 3. chapter 8 (Part II, from plan to run) executed by papermill with device="cuda" (OUT_DIR/ch8_cuda.ipynb).
#
# Wheels in .whl/ (for a machine that cannot reach a registry) are installed into /tmp/site first.
# Everything printed also goes to OUT_DIR/session.log. The exit status is the number of failed checks.
set -u
OUT_DIR=${1:?usage: gpu_session.sh OUT_DIR [WORLD_SIZE]}
WORLD=${2:-1}
mkdir -p "$OUT_DIR"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || { echo "gpu_session: installing .whl/ failed"; exit 99; }
    export PYTHONPATH=/tmp/site:$PWD
    export PATH=/tmp/site/bin:$PATH
else
    export PYTHONPATH=$PWD
fi
exec > >(tee -a "$OUT_DIR/session.log") 2>&1
failed=0
step() {  # step NAME LIMIT_S COMMAND...
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    echo "=== $name (limit ${limit}s)"
    timeout "$limit" "$@"; local rc=$?
    echo "=== $name: rc=$rc in $((SECONDS - t0)) s"
    [ "$rc" -eq 0 ] || failed=$((failed + 1))
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
"$PY" -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"

step gpu_check 200 "$PY" benchmarks/gpu_check.py --presets ci,49m,163m --oom-attempts 300 --out "$OUT_DIR"

step plan 30 "$PY" -m lib.galvatron plan --search bert-huge-32 --gpus "$WORLD" --budget-gb 100 \
    --out "$OUT_DIR/plan.json" --print-torchrun --device cuda
step run_check 90 "$PY" -m torch.distributed.run --nproc-per-node "$WORLD" -m lib.galvatron run \
    --plan "$OUT_DIR/plan.json" --device cuda --check --d-model 1280 --n-head 16 --n-layer 32 --seq-len 512 \
    --steps 5 --warmup 2 --out "$OUT_DIR/run.json"

step chapter8 200 "$PY" -m papermill book/galvatron/04_from_plan_to_run.ipynb "$OUT_DIR/ch8_cuda.ipynb" \
    -k python3 --cwd book/galvatron -p device cuda -p world_size "$WORLD" -p d_model 1024 -p n_layer 8 \
    -p n_head 16 -p seq_len 512 -p global_bsz 16 -p steps 5
echo "gpu_session: $failed failed"
exit "$failed"
