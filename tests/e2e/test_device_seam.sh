#!/usr/bin/env bash
# The backend seam (issue 24): sft, generate and export choose their Ops through make_ops from the
# rank's device binding (--device auto|cpu|cuda).
#  1. --device cuda where no GPU is visible fails in each command with exit 1 naming the missing GPU
#     and the host (Topology::discover), never "not implemented" or "cpu backend only". Skipped, visibly,
#     where a GPU is visible (the GPU checks are bench/gpu_check.sh's).
#  2. --device auto / cpu train on the CPU backend and the start line names it, with the precision.
#  3. A CUDA build's trlhpc links cuBLASLt, cuDNN and NCCL and contains the CUDA backend (before the seam
#     the linker dropped CudaOps and cuBLAS altogether): checked when `trlhpc env` reports a CUDA toolkit.
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # trlhpc's singleton MPI start, whoever runs it
TINY=(--model_config "$ROOT/examples/tiny-chat/config.json" --tokenizer "$ROOT/examples/tiny-chat"
  --dataset_name "$ROOT/examples/tiny-chat/train.jsonl" --max_length 128 --per_device_train_batch_size 2
  --logging_steps 1 --peak_flops 1e12 --dataset_cache_dir "$WORK/cache")

"$TRLHPC" env > "$WORK/env.txt" 2>&1 || fatal "trlhpc env failed: $(cat "$WORK/env.txt")"
gpu_visible=0
grep -q "device: --device auto: no GPU visible" "$WORK/env.txt" || gpu_visible=1

# 2. auto and cpu: the CPU backend, named on the start line with the precision.
"$TRLHPC" sft "${TINY[@]}" --max_steps 2 --save_steps 2 --output_dir "$WORK/cpu" --device cpu > "$WORK/cpu.log" 2>&1 \
  || fatal "--device cpu run failed: $(tail -5 "$WORK/cpu.log")"
grep -q "backend cpu (fp32, .* GEMM, 1 threads), device collectives mpi (host memory)" "$WORK/cpu.log" || fatal "start line does not name the cpu backend: $(grep backend "$WORK/cpu.log")"
"$TRLHPC" sft "${TINY[@]}" --max_steps 2 --output_dir "$WORK/bf16" --device cpu --bf16 > "$WORK/bf16.log" 2>&1 \
  || fatal "--device cpu --bf16 run failed: $(tail -5 "$WORK/bf16.log")"
grep -q "backend cpu (bf16 mixed precision, .* GEMM" "$WORK/bf16.log" || fatal "start line does not name bf16 on the cpu backend"
if [ $gpu_visible = 0 ]; then
  "$TRLHPC" sft "${TINY[@]}" --max_steps 2 --output_dir "$WORK/auto" --device auto > "$WORK/auto.log" 2>&1 \
    || fatal "--device auto run failed: $(tail -5 "$WORK/auto.log")"
  grep -q "backend cpu (fp32" "$WORK/auto.log" || fatal "--device auto without a GPU did not choose the cpu backend"
fi

# 1. --device cuda without a GPU: exit 1, the GPU and the host named, in every command.
if [ $gpu_visible = 1 ]; then
  echo "SKIP part 1: a GPU is visible here (--device cuda would train on it)"
else
  expect_no_gpu() {  # name, command...
    local name=$1; shift
    "$@" > "$WORK/$name.log" 2>&1
    local rc=$?
    [ $rc = 1 ] || fatal "$name --device cuda without a GPU: exit $rc, expected 1: $(tail -3 "$WORK/$name.log")"
    grep -q -- "--device cuda, but host .* has no visible GPU" "$WORK/$name.log" \
      || fatal "$name: the message does not name the missing GPU: $(tail -3 "$WORK/$name.log")"
    grep -q -i "not implemented\|cpu backend only" "$WORK/$name.log" && fatal "$name: says not implemented"
    return 0
  }
  expect_no_gpu sft "$TRLHPC" sft "${TINY[@]}" --max_steps 1 --output_dir "$WORK/cuda" --device cuda
  expect_no_gpu generate "$TRLHPC" generate "$WORK/cpu" --prompt "Hello" --max_new_tokens 2 --device cuda
  expect_no_gpu export "$TRLHPC" export "$WORK/cpu/checkpoint-2" --output_dir "$WORK/exported" --device cuda
  [ -e "$WORK/exported" ] && fatal "export --device cuda without a GPU wrote $WORK/exported"
fi
# The commands' own defaults still work without a GPU.
"$TRLHPC" generate "$WORK/cpu" --prompt "Hello" --max_new_tokens 2 > "$WORK/gen.log" 2>&1 || fatal "generate (auto): $(tail -3 "$WORK/gen.log")"
"$TRLHPC" export "$WORK/cpu/checkpoint-2" --output_dir "$WORK/exported" > "$WORK/export.log" 2>&1 || fatal "export (cpu): $(tail -3 "$WORK/export.log")"
[ -f "$WORK/exported/model.safetensors" ] || fatal "export wrote no model.safetensors"

# 3. A CUDA build links the GPU libraries and holds the CUDA backend.
if grep -q "CUDA toolkit" "$WORK/env.txt"; then
  libs=$(ldd "$TRLHPC")
  for lib in libcublasLt libcudnn libnccl libcudart; do
    grep -q "$lib" <<<"$libs" || fatal "a CUDA build of trlhpc does not link $lib"
  done
  nm -C "$TRLHPC" 2>/dev/null | grep -q "cuda_backend::CudaOpsImpl::matmul" || fatal "the CUDA backend is not in the binary"
else
  echo "SKIP part 3: trlhpc was built without CUDA"
fi
echo "PASS"
e2e_end
