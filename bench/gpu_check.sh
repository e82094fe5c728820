#!/usr/bin/env bash
# Device checks of the dumper, for a lent GPU machine (run from the repository root):
#   bash bench/gpu_check.sh
# 1. the CUDA tests: dump the seeded SmallNet on cuda, compare it with its CPU dump (all pass),
#    and a faulty LSTM backward on cuda flagged at VF_lstm_0_backward;
# 2. the dump overhead benchmark on the GPU (undumped / summary_only / full npy step times).
# Figures go to stdout and, when $OUT is set, to $OUT/gpu_check.txt.
set -uo pipefail
PY=${PYTHON:-python3}
if [ -x .venv/bin/python ]; then PY=.venv/bin/python; fi
log=${OUT:-/tmp}/gpu_check.txt
{
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
  "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  "$PY" -m pytest -q -p no:cacheprovider tests/dumper/test_cuda.py tests/dumper/test_compare_dumps.py
  echo "pytest exit: $?"
  "$PY" bench/dump_overhead.py --device cuda --steps 10
  echo "bench exit: $?"
} 2>&1 | tee "$log"
