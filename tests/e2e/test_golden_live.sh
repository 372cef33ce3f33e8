#!/usr/bin/env bash
# Live golden comparison: where torch and transformers are importable, regenerate the PyTorch fixtures
# (tests/golden/make_golden.py) into a temporary folder and run the model/trainer comparisons against
# them. Without torch it is reported as SKIPPED by ctest (exit 77) with the reason printed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
TESTS=$(dirname "$TRLHPC")/tests
python3 -c "import torch, transformers, safetensors" 2>/dev/null ||
  skip "torch/transformers/safetensors are not importable here (pip install torch transformers safetensors to run the live comparison)"
python3 "$ROOT/tests/golden/make_golden.py" --out "$WORK" 2>&1 | grep -E "loss" || true
python3 "$ROOT/tests/golden/make_qwen3_golden.py" --out "$WORK" 2>&1 | grep -E "loss" || true
python3 "$ROOT/tests/golden/make_sliding_golden.py" --out "$WORK" 2>&1 | grep -E "loss" || true
python3 "$ROOT/tests/golden/make_gemma3_golden.py" --out "$WORK" 2>&1 | grep -E "loss" || true
python3 "$ROOT/tests/golden/make_gemma2_golden.py" --out "$WORK" 2>&1 | grep -E "loss" || true
export TRLHPC_GOLDEN_DIR=$WORK
"$TESTS/test_golden_transformers" || fail "test_golden_transformers against the regenerated fixtures"
"$MPIRUN" --oversubscribe -np 2 "$TESTS/mpi_test_golden_training" || fail "mpi_test_golden_training against the regenerated fixtures"
e2e_end
