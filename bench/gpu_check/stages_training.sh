# Sourced by bench/gpu_check/run.sh: the stages that train.
#   stage_curves     30 steps of the pretrained stories260K on the C4 sample: CPU fp32 (the reference),
#                    GPU fp32 (loss and grad_norm within 1e-4 of the CPU at every step), GPU --bf16 (loss
#                    within 2 % of the CPU fp32 curve, and not equal to it); the 1-rank GPU run's device
#                    collectives must be NCCL (world size 1). Records fp32_curve, bf16_curve, nccl_world_size_1
#   stage_layouts    2 and 4 ranks sharing the GPU (the staged MPI backend): ddp, zero3, tp 2, cp 2, sp 2
#                    (and each with dp 2 on 4 ranks), each curve within LAYOUT_BOUND of the 1-GPU fp32 one.
#                    Records layouts
#   stage_benchmark  gpu_bench --bf16 on the Qwen2.5-0.5B shape (one packed 4096-token row, 24 layers), then
#                    the PyTorch + transformers peer on the same row (bench/gpu_peer.py, autocast bf16, sdpa,
#                    fused AdamW). Records benchmark (tokens_per_second, mfu, peak_memory_gib) and peer
#   stage_attention_choice  (last of all stages, with the time left) the same gpu_bench with
#                    --cuda_attention cudnn. Records attention_choice (cuDNN's tokens/s over the kernel's)
# The dry run runs the same code with --device cpu for the "GPU" side: the comparisons see CPU-vs-CPU
# curves, the layouts stage one 2-rank layout, the benchmark only the batch dump and the peer's CPU
# self-check at a tiny shape.

STEPS=${GPU_CHECK_STEPS:-30}  # fewer only for the ctest's dry run (CI time)
# Why 1e-4 for layouts: on the CPU all ten layouts of this job follow 1 rank within 3.6e-7 (loss) and
# 1.9e-6 (grad_norm) over 30 steps (`run --dry-run` with GPU_CHECK_ALL_LAYOUTS=1, 2026-12-04): layouts differ
# by summation order only, which on the GPU (other GEMM algorithms per shard shape, staged reductions) is
# the same kind of difference; 1e-4 leaves a 50x margin and still catches a wrong shard or a missed
# reduction, which move the curve by percents.
LAYOUT_BOUND=${LAYOUT_BOUND:-1e-4}

# sft NAME NP DEVICE TIMEOUT FLAGS...: 30 steps of stories260K; the log in $WORK/NAME.log, metrics in $WORK/NAME/.
sft() {
  local name=$1 np=$2 device=$3 limit=$4
  shift 4
  with_libs timeout "$limit" "$GPU_MPIRUN" --oversubscribe --bind-to none -np "$np" -x OMP_NUM_THREADS \
    "$PREFIX/bin/trlhpc" sft --model_name_or_path "$DATA/stories260K" --dataset_name "$DATA/c4_text.jsonl" \
    --max_length 256 --packing --max_steps $STEPS --learning_rate 1e-3 --lr_scheduler_type constant \
    --logging_steps 1 --seed 42 --peak_flops 1e12 --dataset_cache_dir none --eval_strategy no \
    --device "$device" --output_dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1
  local rc=$?
  echo "===== $name ($np ranks, --device $device $*): exit $rc"
  grep -E 'backend|error|Error' "$WORK/$name.log" | head -5
  [ $rc = 0 ] || tail -20 "$WORK/$name.log"
  return $rc
}

# compare NAME REF RUN BOUND [extra report.py flags]: records NAME.
compare() {
  local name=$1 ref=$2 run=$3 bound=$4
  shift 4
  local gpu=()
  [ $DRY = 0 ] && gpu=(--gpu)
  "${REPORT[@]}" curve "$WORK/$ref/metrics.jsonl" "$WORK/$run/metrics.jsonl" --name "$name" --bound "$bound" \
    --steps $STEPS --results "$RESULTS" "${gpu[@]}" "$@"
}

stage_curves() {
  local cap gpu_device=cuda
  [ $DRY = 1 ] && gpu_device=cpu
  cap=$(budget 100)
  [ "$cap" = 0 ] && { record fp32_curve null "time budget spent"; return 0; }
  [ $DRY = 1 ] && cap=$(budget 240)  # two shared cores here
  say "stories260K, $STEPS steps: CPU fp32, $gpu_device fp32, $gpu_device bf16 (at once, ${cap}s)"
  local threads=4  # 16 cores there; here the three runs share 2 cores
  [ $DRY = 1 ] && threads=1
  OMP_NUM_THREADS=$threads sft cpu_fp32 1 cpu "$cap" --per_device_train_batch_size 8 &
  local p1=$!
  OMP_NUM_THREADS=$threads sft gpu_fp32 1 $gpu_device "$cap" --per_device_train_batch_size 8 &
  local p2=$!
  OMP_NUM_THREADS=$threads sft gpu_bf16 1 $gpu_device "$cap" --per_device_train_batch_size 8 --bf16 &
  local p3=$!
  wait $p1; local r1=$?
  wait $p2; local r2=$?
  wait $p3; local r3=$?
  local what="GPU"
  [ $DRY = 1 ] && what="dry run, CPU standing in for the GPU:"
  if [ $r1 != 0 ]; then
    record fp32_curve false "the CPU reference run failed (exit $r1; curves.log)"
    record bf16_curve null "no CPU reference curve"
    return 0
  fi
  if [ $r2 = 0 ]; then
    compare fp32_curve cpu_fp32 gpu_fp32 1e-4 --keys loss,grad_norm
  else
    record fp32_curve false "$what fp32 run failed (exit $r2; curves.log)"
  fi
  if [ $r3 = 0 ]; then
    compare bf16_curve cpu_fp32 gpu_bf16 0.02 --keys loss --min_diff 1e-6
  else
    record bf16_curve false "$what bf16 run failed (exit $r3; curves.log)"
  fi
  local line
  line=$(grep -m1 -o 'device collectives [a-z() -]*' "$WORK/gpu_fp32.log")
  if [ $DRY = 1 ]; then
    record nccl_world_size_1 null "dry run: the 1-rank run says '$line' (on the GPU it must say nccl)"
  elif [[ $line == *nccl* ]]; then
    record nccl_world_size_1 true "1 rank on the GPU trained through NCCL ('$line')"
  else
    record nccl_world_size_1 false "the 1-rank GPU run's start line says '${line:-nothing}', not nccl"
  fi
  for f in cpu_fp32 gpu_fp32 gpu_bf16; do echo "===== $f metrics"; cat "$WORK/$f/metrics.jsonl" 2> /dev/null; done
}

stage_layouts() {
  local device=cuda
  [ $DRY = 1 ] && device=cpu
  if [ ! -f "$WORK/gpu_fp32/metrics.jsonl" ]; then
    record layouts null "no 1-GPU fp32 curve to compare with (stage curves)"
    return 0
  fi
  # name ranks flags... (global batch 8 rows of 256 tokens: dp ranks share it, tp/cp/sp ranks see the same rows)
  local batches=(
    "ddp 2 --per_device_train_batch_size 4|zero3 2 --sharding zero3 --per_device_train_batch_size 4|tp2 2 --tp_size 2 --per_device_train_batch_size 8|cp2 2 --cp_size 2 --per_device_train_batch_size 8|sp2 2 --sp_size 2 --per_device_train_batch_size 8"
    "ddp4 4 --per_device_train_batch_size 2|zero3_4 4 --sharding zero3 --per_device_train_batch_size 2|tp2_dp2 4 --tp_size 2 --per_device_train_batch_size 4"
    "cp2_dp2 4 --cp_size 2 --per_device_train_batch_size 4|sp2_dp2 4 --sp_size 2 --per_device_train_batch_size 4")
  if [ $DRY = 1 ] && [ "${GPU_CHECK_ALL_LAYOUTS:-0}" != 1 ]; then
    batches=("ddp 2 --per_device_train_batch_size 4")
    say "dry run: one layout (ddp on 2 ranks) on the CPU; skipped: the other 9 (GPU_CHECK_ALL_LAYOUTS=1 runs them)"
  fi
  local batch spec cap name np pids names failed=() passed=0 total=0 i
  for batch in "${batches[@]}"; do
    cap=$(budget 60)
    [ $DRY = 1 ] && cap=$(budget 400)  # up to 12 ranks on two shared cores
    if [ "$cap" = 0 ]; then
      failed+=("not run (time budget): ${batch//|/, }")
      continue
    fi
    IFS='|' read -r -a specs <<< "$batch"
    pids=() names=()
    for spec in "${specs[@]}"; do
      set -- $spec
      name=$1 np=$2
      shift 2
      OMP_NUM_THREADS=1 sft "$name" "$np" $device "$cap" "$@" &
      pids+=($!) names+=("$name")
    done
    for i in "${!pids[@]}"; do
      total=$((total + 1))
      name=${names[$i]}
      if ! wait "${pids[$i]}"; then
        failed+=("$name (run failed)")
      elif [ $DRY = 0 ] && ! grep -q 'device collectives staged' "$WORK/$name.log"; then
        failed+=("$name (not the staged MPI backend: $(grep -m1 -o 'device collectives [a-z() -]*' "$WORK/$name.log"))")
      elif compare "layout_$name" gpu_fp32 "$name" "$LAYOUT_BOUND" --keys loss,grad_norm; then
        passed=$((passed + 1))
      else
        failed+=("$name ($(grep "\"layout_$name\"" "$RESULTS" | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["detail"])'))")
      fi
    done
  done
  local what=""
  [ $DRY = 1 ] && what="dry run, CPU ranks against the CPU 1-rank curve: "
  if [ ${#failed[@]} = 0 ]; then
    record layouts true "$what$passed of $total layouts within $LAYOUT_BOUND of the 1-rank curve over $STEPS steps"
  elif [ $passed -gt 0 ] || [[ "${failed[*]}" != *"not run"* ]]; then
    record layouts false "$what$passed of $total passed; ${failed[*]}"
  else
    record layouts null "${failed[*]}"
  fi
}

stage_benchmark() {
  local bench=$PREFIX/bin/gpu_bench
  [ -x "$bench" ] || { record benchmark null "no gpu_bench binary"; record peer null "no batch (no gpu_bench)"; return 0; }
  if [ $DRY = 1 ]; then
    # Documents of 128..256 tokens, so that the peer's self-check sees several in 512 tokens.
    with_libs "$bench" --seq_len 512 --max_doc 256 --dump_batch "$WORK/batch.json" ||
      { record benchmark false "gpu_bench --dump_batch failed"; return 0; }
    record benchmark null "dry run: gpu_bench dumped a 1x512 packed batch; skipped: the 0.5B-shape bf16 training step"
    # GPU_CHECK_PEER_ENV: extra environment for python3 alone (e.g. the CUDA stand-ins a CUDA torch wheel
    # needs to import on a machine without CUDA's libraries: tests/fixtures/make_trl_curves.py).
    local peer_env=(env ${GPU_CHECK_PEER_ENV:-})
    if ! "${peer_env[@]}" python3 -c 'import torch, transformers' > /dev/null 2>&1; then
      record peer null "dry run: torch + transformers not importable here (python3 -c 'import torch, transformers' fails), peer self-check skipped"
      return 0
    fi
    if "${peer_env[@]}" timeout 300 python3 "$ROOT/bench/gpu_peer.py" --batch "$WORK/batch.json" --device cpu --tiny --layers 2 \
        --steps 1 --warmup 0 --mode fp32 --self_check --json "$WORK/peer.json"; then
      record peer null "dry run: the peer's CPU self-check at a tiny shape passed on gpu_bench's batch (packed documents masked apart); skipped: the GPU run"
    else
      record peer false "dry run: the peer's CPU self-check failed (benchmark.log)"
    fi
    return 0
  fi
  local cap
  cap=$(budget 100)
  [ "$cap" = 0 ] && { record benchmark null "time budget spent"; record peer null "time budget spent"; return 0; }
  with_libs "$bench" --dump_batch "$WORK/batch.json"
  say "gpu_bench --bf16, Qwen2.5-0.5B shape, 1x4096 packed, 8 timed steps (${cap}s)"
  if with_libs timeout "$cap" "$bench" --bf16 --skip_kernels --steps 8 --warmup 2 --json "$WORK/bench.json"; then
    local v
    v=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(f"{k}={d[k]}" for k in ("tokens_per_second","mfu","peak_memory_gib","step_seconds","loss")))' "$WORK/bench.json")
    record benchmark true "gpu_bench --bf16: $v" $v
  else
    record benchmark false "gpu_bench --bf16 failed or timed out after ${cap}s"
  fi
  cap=$(budget 100)
  [ "$cap" = 0 ] && { record peer null "time budget spent"; return 0; }
  say "peer: torch + transformers, autocast bf16, sdpa, fused AdamW, the same row (${cap}s)"
  if timeout "$cap" python3 "$ROOT/bench/gpu_peer.py" --batch "$WORK/batch.json" --mode autocast --steps 8 --warmup 2 \
      --self_check --json "$WORK/peer.json"; then
    local v
    v=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(f"{k}={d[k]}" for k in ("tokens_per_second","mfu","peak_memory_gib","step_seconds","loss")))' "$WORK/peer.json")
    record peer true "torch peer (autocast bf16): $v" $v
  else
    record peer false "the peer failed or timed out after ${cap}s (benchmark.log)"
  fi
}

# The measurement --cuda_attention auto waits for (docs/GPU-CHECK.md, "cuDNN attention"): the same
# benchmark with cuDNN's fused SDPA instead of the hand-written kernel. Run after every other stage (run.sh),
# with what time is left: it decides a default, the stages before it decide correctness.
stage_attention_choice() {
  local bench=$PREFIX/bin/gpu_bench cap
  if [ $DRY = 1 ]; then
    record attention_choice null "dry run: skipped: gpu_bench --bf16 with --cuda_attention cudnn against the kernel"
    return 0
  fi
  [ -f "$WORK/bench.json" ] || { record attention_choice null "no kernel benchmark to compare with (stage benchmark)"; return 0; }
  cap=$(budget 100)
  # Under 60 s the 24-layer benchmark cannot finish: not run, rather than a timeout reported as a failure.
  [ "$cap" -lt 60 ] && { record attention_choice null "time budget spent (${cap}s left, the benchmark needs ~60s)"; return 0; }
  say "gpu_bench --bf16 with --cuda_attention cudnn, the same row (${cap}s)"
  with_libs timeout "$cap" "$bench" --bf16 --cuda_attention cudnn --skip_kernels --steps 8 --warmup 2 \
    --json "$WORK/bench_cudnn.json"
  local rc=$?
  [ $rc = 124 ] && { record attention_choice null "the cuDNN benchmark ran out of the time left (${cap}s)"; return 0; }
  [ $rc = 0 ] || { record attention_choice false "gpu_bench --bf16 with --cuda_attention cudnn exited $rc"; return 0; }
  local v
  # The baseline must be the hand-written kernel (auto chose it: no cuDNN call), the other run cuDNN.
  v=$(python3 - "$WORK/bench.json" "$WORK/bench_cudnn.json" <<'PY'
import json, sys
k, c = (json.load(open(p)) for p in sys.argv[1:3])
print("cudnn_tokens_per_second=%s kernel_tokens_per_second=%s cudnn_over_kernel=%.4f cudnn_calls=%s kernel_cudnn_calls=%s "
      "cudnn_loss=%s kernel_loss=%s"
      % (c["tokens_per_second"], k["tokens_per_second"], c["tokens_per_second"] / k["tokens_per_second"],
         c["cudnn_attention_calls"], k["cudnn_attention_calls"], c["loss"], k["loss"]))
PY
) || { record attention_choice false "could not read bench.json / bench_cudnn.json (benchmark.log)"; return 0; }
  if [[ " $v" == *" cudnn_calls=0 "* ]]; then
    record attention_choice false "--cuda_attention cudnn made no cuDNN attention call: $v" $v
  elif [[ "$v" != *"kernel_cudnn_calls=0 "* ]]; then
    record attention_choice null "the benchmark stage's run already used cuDNN (auto chose it): no kernel baseline: $v"
  else
    record attention_choice true "cuDNN vs kernel attention (flip kCudnnAttentionMeasuredFaster only if cudnn_over_kernel > 1): $v" $v
  fi
}
