#!/bin/bash
# GPU check of rl-core and rl-engines on a CUDA machine without Ray (the lent device): run from anywhere;
# writes each step's log to $OUT (or /tmp/device_check) and prints its tail.
cd "$(dirname "$0")/../.."
export PYTHONPATH=packages/rl-core/src:packages/rl-engines/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/device_check}; mkdir -p "$OUT"
nvidia-smi -L
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())"
step() { name=$1; limit=$2; shift 2; s=$(date +%s); timeout $limit "$@" > $OUT/$name.txt 2>&1; rc=$?; echo "== $name rc=$rc $(( $(date +%s) - s ))s"; tail -n ${TAILN:-4} $OUT/$name.txt; }
PT="python3 -m pytest -q -p no:cacheprovider -p no:benchmark -o addopts="
step core_device 60 $PT packages/rl-core/tests/advantages/test_device.py packages/rl-core/tests/logprobs/test_logprobs_device.py
RL_ENGINES_TEST_DEVICE=cuda TAILN=8 step engines_rollout_cuda 150 $PT -n 6 packages/rl-engines/tests/rollout
RL_ENGINES_TEST_DEVICE=cuda step openvla_cuda 100 $PT packages/rl-engines/tests/vla/test_openvla.py
TAILN=14 step smoke_cuda 60 python3 tools/device/cuda_smoke.py
