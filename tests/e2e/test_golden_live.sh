#!/usr/bin/env bash
# Live golden comparison: where torch and transformers are importable, regenerate the PyTorch fixtures
# (tests/golden/make_golden.py) into a temporary folder and run the model/trainer comparisons against
# them. Without torch it is reported as SKIPPED by ctest (exit 77) with the reason printed.
set -euo pipefail
TRLHPC=$1
MPIRUN=${2:-mpirun}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TESTS=$(dirname "$TRLHPC")/tests
if ! python3 -c "import torch, transformers, safetensors" 2>/dev/null; then
  echo "SKIPPED: torch/transformers/safetensors are not importable here (pip install torch transformers safetensors to run the live comparison)"
  exit 77
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 "$ROOT/tests/golden/make_golden.py" --out "$WORK" 2>&1 | grep -E "loss" || true
python3 "$ROOT/tests/golden/make_qwen3_golden.py" --out "$WORK" 2>&1 | grep -E "loss" || true
python3 "$ROOT/tests/golden/make_sliding_golden.py" --out "$WORK" 2>&1 | grep -E "loss" || true
python3 "$ROOT/tests/golden/make_gemma3_golden.py" --out "$WORK" 2>&1 | grep -E "loss" || true
python3 "$ROOT/tests/golden/make_gemma2_golden.py" --out "$WORK" 2>&1 | grep -E "loss" || true
export TRLHPC_GOLDEN_DIR=$WORK
"$TESTS/test_golden_transformers"
"$MPIRUN" --oversubscribe -np 2 "$TESTS/mpi_test_golden_training"
