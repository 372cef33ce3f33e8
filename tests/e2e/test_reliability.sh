#!/usr/bin/env bash
# Issue 30 ("nothing lost, nothing hung"): the probes a hostile-but-realistic user tried, each as a
# regression case. Every run is bounded by `timeout`, so a hang is a failure, not a stuck CI job.
set -u
# The read-only output dir cases mount read-only tmpfs folders: in a private mount namespace (root)
# they vanish with the test, however it ends.
if [ -z "${TRLHPC_RELIABILITY_NS:-}" ] && [ "$(id -u)" = 0 ] && unshare -m --propagation private true 2>/dev/null; then
  TRLHPC_RELIABILITY_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
trap 'umount "$WORK/ro" "$WORK/e7r" 2>/dev/null; chmod -R u+w "$WORK"; rm -rf "$WORK"' EXIT
cd "$WORK"  # every path below is absolute; anything written relative lands in the scratch folder
cases=0
TINY="--model_config $ROOT/examples/tiny-chat/config.json --tokenizer $ROOT/examples/tiny-chat
  --dataset_name $ROOT/examples/tiny-chat/train.jsonl --max_length 128 --packing --per_device_train_batch_size 2
  --logging_steps 1 --comm_progress none"

# run NAME NP WANT_RC ARGS...: runs trlhpc on NP ranks (60 s bound), wants exit WANT_RC; log in $WORK/NAME.log.
run() {
  local name=$1 np=$2 want=$3
  shift 3
  cases=$((cases + 1))
  trlhpc_np 120 "$np" "$@" >"$WORK/$name.log" 2>&1
  local rc=$?
  if [ "$rc" -ne "$want" ]; then fail_log "$name: exit $rc (want $want)" "$WORK/$name.log" 20; return 1; fi
  return 0
}

# expect NAME NP WANT_RC PATTERN ARGS...: as run, and PATTERN (fixed string) printed at least once.
expect() {
  local name=$1 np=$2 want=$3 pattern=$4
  shift 4
  run "$name" "$np" "$want" "$@" || return 1
  if ! grep -qF -- "$pattern" "$WORK/$name.log"; then fail_log "$name: '$pattern' not printed" "$WORK/$name.log" 20; return 1; fi
  echo "ok   $name: $(grep -m1 -F -- "$pattern" "$WORK/$name.log")"
}

# Item 2: a step count that overflows int64 is an error naming the flag, not 0 steps and exit 0.
expect epochs-overflow 2 1 "--num_train_epochs 1e+18:" sft $TINY --num_train_epochs 1e18 --output_dir "$WORK/e2"
[ -e "$WORK/e2/model.safetensors" ] && fail "epochs-overflow: an untrained model was saved"

# Item 9: --learning_rate 0 is accepted (HF, TRL), trains and logs lr 0.
expect lr-zero 1 0 "saved the model" sft $TINY --learning_rate 0 --max_steps 2 --output_dir "$WORK/e9"
grep -q '"learning_rate":0.0' "$WORK/e9/metrics.jsonl" || fail "lr-zero: metrics.jsonl does not log learning_rate 0"
# Issues 43/44: without --peak_flops the start line names both MFU references, the progress line gives
# MFU below 100 % with its share of the measured GEMM rate, and metrics.jsonl carries both ratios.
grep -qE "MFU against [0-9.]+ [GTM]FLOP/s nominal \(.*FLOP/cycle x [0-9]+ cores? x [0-9.]+ GHz.*; measured GEMM [0-9.]+ [GTM]FLOP/s per rank" \
  "$WORK/lr-zero.log" || fail_log "lr-zero: the start line does not name the nominal peak and the measured GEMM rate" "$WORK/lr-zero.log" 20
grep -qE "MFU [0-9]?[0-9]\.[0-9]% \([0-9.]+% of GEMM rate\)" "$WORK/lr-zero.log" ||
  fail_log "lr-zero: no progress line with MFU below 100 % and its share of the GEMM rate" "$WORK/lr-zero.log" 20
python3 -c "import json,sys; l=[json.loads(l) for l in open('$WORK/e9/metrics.jsonl') if '\"mfu\"' in l]; sys.exit(0 if l and all(0 < m['mfu'] < 1 and m['mfu_of_gemm_rate'] > 0 for m in l) else 1)" ||
  fail "lr-zero: metrics.jsonl lacks mfu in (0, 1) or mfu_of_gemm_rate"

# Item 10: metrics.jsonl logs the rate each step used (transformers 5 / TRL 1.16): a 1-step warmup logs 0
# at step 1, then the peak, then the linear decay's 3e-3 x (3 - 2) / (3 - 1).
expect lr-logged 1 0 "saved the model" sft $TINY --learning_rate 3e-3 --lr_scheduler_type linear --warmup_steps 1 \
  --max_steps 3 --output_dir "$WORK/e10"
python3 - "$WORK/e10/metrics.jsonl" <<'PY' || fail "lr-logged: learning_rate is not the rate of the step"
import json, sys
got = [json.loads(l)["learning_rate"] for l in open(sys.argv[1]) if "loss" in l]
want = [0.0, 3e-3, 1.5e-3]
print("   learning_rate", got, "want", want)
sys.exit(0 if len(got) == 3 and all(abs(g - w) <= 1e-9 for g, w in zip(got, want)) else 1)
PY

# Item 11: under mpirun -np 1 with the output redirected the progress line is plain lines (no \r or
# escape codes); MFU above 100 % (--peak_flops far below the real rate) is printed as computed, not
# capped, with one warning naming --peak_flops as the suspect number (issues 43/44); and a window of
# skipped steps prints "-", not "-nan".
expect progress-plain 1 0 "is above the peak it is measured against (1 FLOP/s per rank (--peak_flops)): --peak_flops is below" \
  sft $TINY --max_steps 2 --logging_steps 1 --peak_flops 1 --output_dir "$WORK/e11"
grep -q $'\r\|\033' "$WORK/progress-plain.log" && fail "progress-plain: carriage return or escape code in a redirected log"
[ "$(grep -c "is above the peak it is measured against" "$WORK/progress-plain.log")" = 1 ] ||
  fail_log "progress-plain: the MFU warning is not printed exactly once" "$WORK/progress-plain.log" 20
grep -q "MFU 100.0%" "$WORK/progress-plain.log" && fail_log "progress-plain: MFU capped at 100 %" "$WORK/progress-plain.log" 20
python3 -c "import json,sys; l=[json.loads(l) for l in open('$WORK/e11/metrics.jsonl') if '\"mfu\"' in l]; sys.exit(0 if len(l) == 2 and all(m['mfu'] > 1 and m['mfu_of_gemm_rate'] is None for m in l) else 1)" ||
  fail "progress-plain: metrics.jsonl should hold the real mfu (> 1) and a null mfu_of_gemm_rate under --peak_flops"
expect skipped-window 1 0 "skipped" sft $TINY --max_steps 3 --learning_rate 1e30 --skip_nonfinite_steps --output_dir "$WORK/e11b"
grep -qiE "nan tok/s|MFU -?nan" "$WORK/skipped-window.log" && fail_log "skipped-window: nan printed" "$WORK/skipped-window.log" 20

# Item 3: pre-tokenized ids outside the model's vocabulary are
# refused while the dataset is prepared, naming file and row, on every rank; so is a tokenizer larger
# than the model's vocabulary, at start.
VOCAB=$(python3 -c "import json; print(json.load(open('$ROOT/examples/tiny-chat/config.json'))['vocab_size'])")
printf '{"input_ids": [1, 2, 3, 4]}\n{"input_ids": [1, %d, 3, 4]}\n' "$VOCAB" > "$WORK/ids.jsonl"
expect ids-outside-vocab 2 1 "ids.jsonl:2: token id $VOCAB at position 1 is outside the model's vocabulary" \
  sft --model_config "$ROOT/examples/tiny-chat/config.json" --dataset_name "$WORK/ids.jsonl" --max_steps 1 --output_dir "$WORK/e3"
[ "$(grep -c "outside the model's vocabulary" "$WORK/ids-outside-vocab.log")" -ge 2 ] || fail "ids-outside-vocab: not on every rank"
python3 -c "import json; c=json.load(open('$ROOT/examples/tiny-chat/config.json')); c['vocab_size']=64; json.dump(c, open('$WORK/small_vocab.json','w'))"
expect tokenizer-larger 2 1 "tokens but the model's vocab_size is 64" sft $TINY --model_config "$WORK/small_vocab.json" \
  --max_steps 1 --output_dir "$WORK/e3b"

# Item 7: a truncated or non-HDF5 state.h5 is bad input (exit 1 naming the file, suggesting an earlier
# checkpoint), not a runtime failure (exit 2) with HDF5-DIAG noise.
expect ckpt-base 2 0 "checkpoint saved" sft $TINY --max_steps 2 --save_steps 1 --output_dir "$WORK/e7"
cp -r "$WORK/e7/checkpoint-2" "$WORK/e7/checkpoint-2.orig"
head -c 4096 "$WORK/e7/checkpoint-2.orig/state.h5" > "$WORK/e7/checkpoint-2/state.h5"
expect state-truncated 2 1 "checkpoint-2/state.h5 is truncated" sft $TINY --max_steps 2 --save_steps 1 --output_dir "$WORK/e7" \
  --resume_from_checkpoint "$WORK/e7/checkpoint-2"
grep -q "HDF5-DIAG" "$WORK/state-truncated.log" && fail "state-truncated: HDF5-DIAG noise"
head -c 100000 /dev/urandom > "$WORK/e7/checkpoint-2/state.h5"
expect state-not-hdf5 2 1 "checkpoint-2/state.h5 is not an HDF5 file" sft $TINY --max_steps 2 --save_steps 1 \
  --output_dir "$WORK/e7" --resume_from_checkpoint "$WORK/e7/checkpoint-2"
rm -rf "$WORK/e7/checkpoint-2.orig"

# Item 6: resume identity. The dataset by content and order (not counts): the same rows in another order
# are refused; manifest.json is checked against the copy written inside state.h5 (an edited step is not
# believed); another --seed is named as such, not as "another dataset".
mkdir -p "$WORK/d6"
cp "$ROOT/examples/tiny-chat/train.jsonl" "$WORK/d6/train.jsonl"
TINY6="--model_config $ROOT/examples/tiny-chat/config.json --tokenizer $ROOT/examples/tiny-chat
  --dataset_name $WORK/d6/train.jsonl --max_length 128 --packing --per_device_train_batch_size 2
  --logging_steps 1 --comm_progress none --output_dir $WORK/e6 --save_steps 2"
expect ident-base 2 0 "checkpoint saved" sft $TINY6 --max_steps 2
cp -r "$WORK/e6/checkpoint-2" "$WORK/e6-checkpoint-2.orig"
expect ident-seed 2 1 "another --seed (it decides the data order and the packing shuffle) than the checkpoint (seed: checkpoint 42, this run 7)" \
  sft $TINY6 --max_steps 3 --resume_from_checkpoint latest --seed 7
python3 - "$WORK/e6/checkpoint-2/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["step"] = 1
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
expect ident-manifest-step 2 1 "manifest.json does not match the manifest written inside state.h5 with the tensors (manifest.step: the copy in state.h5 2, manifest.json 1)" \
  sft $TINY6 --max_steps 3 --resume_from_checkpoint latest
cp "$WORK/e6-checkpoint-2.orig/manifest.json" "$WORK/e6/checkpoint-2/manifest.json"
tac "$ROOT/examples/tiny-chat/train.jsonl" > "$WORK/d6/train.jsonl"  # the same rows, last first
expect ident-reordered 2 1 "another dataset (its rows, their order, or packing / max_length) than the checkpoint (dataset.content:" \
  sft $TINY6 --max_steps 3 --resume_from_checkpoint latest
cp "$ROOT/examples/tiny-chat/train.jsonl" "$WORK/d6/train.jsonl"
expect ident-same 2 0 "resumed from $WORK/e6/checkpoint-2 after step 2" sft $TINY6 --max_steps 3 --resume_from_checkpoint latest

# Item 4: a fresh run into a folder holding an earlier run is refused; --overwrite_output_dir removes
# the earlier run's files (listed in the log) so metrics.jsonl and checkpoints are this run's only;
# `latest` and the directory scan must agree.
expect run-a 1 0 "checkpoint saved" sft $TINY --max_steps 4 --save_steps 2 --output_dir "$WORK/e4"
expect fresh-over-earlier 2 1 "holds checkpoints of an earlier run (checkpoint-2, checkpoint-4, latest)" \
  sft $TINY --max_steps 2 --save_steps 2 --output_dir "$WORK/e4"
[ -d "$WORK/e4/checkpoint-4" ] || fail "fresh-over-earlier: the earlier run's checkpoint-4 was touched"
expect overwrite 2 0 "--overwrite_output_dir: removed the earlier run's checkpoint-2, checkpoint-4" \
  sft $TINY --max_steps 2 --save_steps 2 --output_dir "$WORK/e4" --overwrite_output_dir
[ -d "$WORK/e4/checkpoint-4" ] && fail "overwrite: the earlier run's checkpoint-4 is still there"
python3 -c "import json,sys; s=[json.loads(l)['step'] for l in open('$WORK/e4/metrics.jsonl')]; print('   steps', s); sys.exit(0 if s == [1, 2] else 1)" ||
  fail "overwrite: metrics.jsonl holds more than this run's steps"
# ... so `latest` (the newest committed checkpoint-N, HF's get_last_checkpoint) is this run's checkpoint-2.
expect resume-latest 2 0 "resumed from $WORK/e4/checkpoint-2 after step 2" \
  sft $TINY --max_steps 3 --save_steps 2 --output_dir "$WORK/e4" --resume_from_checkpoint latest

# A re-run over a folder with metrics.jsonl but no checkpoint keeps the old lines aside, never appends.
expect rerun-no-ckpt 1 0 "kept as metrics.jsonl.old" sft $TINY --max_steps 1 --output_dir "$WORK/e9"
[ "$(wc -l < "$WORK/e9/metrics.jsonl")" -eq 1 ] || fail "rerun-no-ckpt: metrics.jsonl holds lines of two runs"

# Item 5: one run per output dir. A lock held by a live process is refused naming host, pid and job; a
# lock left by a dead process on this host is replaced and the log says so.
mkdir -p "$WORK/e5"
echo "$(hostname) $$ job-42 0" > "$WORK/e5/.trlhpc.lock"
expect locked 2 1 "is in use by another run (host $(hostname), pid $$, job job-42" sft $TINY --max_steps 1 --output_dir "$WORK/e5"
dead=$(sh -c 'echo $$')
echo "$(hostname) $dead job-7 0" > "$WORK/e5/.trlhpc.lock"
expect stale-lock 2 0 "replaced the stale lock of a run that is gone (host $(hostname), pid $dead, job job-7)" \
  sft $TINY --max_steps 1 --output_dir "$WORK/e5"
[ -e "$WORK/e5/.trlhpc.lock" ] && fail "stale-lock: the lock was not released at the end"
# Two runs at once into one folder: the second is refused, the first finishes with its checkpoints.
# (long enough, 200 steps, that the second starts while the first trains)
OMP_NUM_THREADS=1 timeout 120 "$MPIRUN" --oversubscribe -np 1 "$TRLHPC" sft $TINY --max_steps 200 --save_steps 100 \
  --output_dir "$WORK/e5b" > "$WORK/first.log" 2>&1 &
first=$!
for _ in $(seq 100); do [ -e "$WORK/e5b/.trlhpc.lock" ] && break; sleep 0.1; done
# The second is refused: "in use" while the first runs, or (a holder on this host gets 15 s to exit,
# in case it is a killed run's rank still going) "holds checkpoints" once the first has finished.
expect concurrent 1 1 "error: --output_dir $WORK/e5b " sft $TINY --max_steps 200 --save_steps 100 --output_dir "$WORK/e5b"
wait $first || fail_log "concurrent: the first run failed" "$WORK/first.log" 20
[ -d "$WORK/e5b/checkpoint-100" ] && [ -d "$WORK/e5b/checkpoint-200" ] || fail "concurrent: a checkpoint of the first run is missing"
python3 -c "import json,sys; s=[json.loads(l)['step'] for l in open('$WORK/e5b/metrics.jsonl') if 'loss' in l]; sys.exit(0 if s == list(range(1, 201)) else 1)" ||
  fail "concurrent: metrics.jsonl is not the first run's steps 1..200 in order"

# Item 8: generate's --max_new_tokens is bounded by the model's context (an error before the KV cache is
# allocated: 1e9 asked for 128 GB and exited 2); a prompt + continuation past it warns as transformers does.
DATA=${TRLHPC_SHARED_DATA:-$ROOT/../shared/data}
CTX=$(python3 -c "import json; print(json.load(open('$DATA/stories260K/config.json'))['max_position_embeddings'])")
expect generate-huge 1 1 "--max_new_tokens 1000000000: more than the model's context (max_position_embeddings $CTX" \
  generate "$DATA/stories260K" --prompt "Once upon a time" --max_new_tokens 1000000000
expect generate-past-context 1 0 "exceed the model's maximum length (max_position_embeddings $CTX)" \
  generate "$DATA/stories260K" --prompt "Once upon a time" --max_new_tokens "$CTX"

# Item 7: a read-only output dir (or --logging_dir) is exit 1 naming the folder on every rank, not a raw
# "filesystem error", and not rank 0 alone failing while the others wait for it (the TensorBoard
# folder hung every other rank). Root ignores permission bits, so as root the folder is a read-only
# tmpfs; otherwise a chmod 555 folder.
mkdir -p "$WORK/ro" "$WORK/e7r"
read_only=""
if [ "$(id -u)" != 0 ]; then
  chmod 555 "$WORK/ro" && read_only=chmod
elif mount -t tmpfs -o ro,size=1m tmpfs "$WORK/ro" 2>/dev/null; then
  read_only=mount
fi
if [ -z "$read_only" ]; then
  echo "SKIP read-only output dir: cannot make a read-only folder here (root without mount rights)"
else
  expect ro-output-dir 2 1 "--output_dir $WORK/ro is not writable" sft $TINY --max_steps 1 --output_dir "$WORK/ro"
  [ "$(grep -c "is not writable" "$WORK/ro-output-dir.log")" -ge 2 ] || fail "ro-output-dir: not on every rank"
  expect ro-output-parent 2 1 "--output_dir $WORK/ro/run cannot be created" sft $TINY --max_steps 1 --output_dir "$WORK/ro/run"
  expect ro-logging-dir 2 1 "--logging_dir $WORK/ro: cannot write" sft $TINY --max_steps 1 --report_to tensorboard \
    --logging_dir "$WORK/ro" --output_dir "$WORK/e7t"
  expect ro-logging-subdir 2 1 "--logging_dir $WORK/ro/tb: cannot create it" sft $TINY --max_steps 1 --report_to tensorboard \
    --logging_dir "$WORK/ro/tb" --output_dir "$WORK/e7u"
  grep -qi "filesystem error" "$WORK"/ro-*.log && fail "read-only: a raw filesystem error was printed"
  # Resuming a run whose folder became read-only (a remount, a quota, a chmod). The folder is a mount
  # point of its own (as a container's bind mount): the final model save used to stage in the parent
  # and fail renaming across file systems (EXDEV, exit 2).
  if [ "$read_only" = mount ] && mount -t tmpfs -o size=64m tmpfs "$WORK/e7r"; then
    expect ro-base 2 0 "checkpoint saved" sft $TINY --max_steps 2 --save_steps 2 --output_dir "$WORK/e7r"
    mount -o remount,ro "$WORK/e7r"
    expect ro-resume 2 1 "--output_dir $WORK/e7r is not writable" sft $TINY --max_steps 3 --save_steps 2 \
      --output_dir "$WORK/e7r" --resume_from_checkpoint latest
  fi
fi

# Item 7: NaN or inf in the weights of --model_name_or_path is refused when the model is opened (every
# rank, naming file, tensor and element), not found steps later as a NaN loss ("lower --learning_rate").
expect nan-base 1 0 "saved the model" sft $TINY --max_steps 1 --output_dir "$WORK/e7n"
python3 - "$WORK/e7n/model.safetensors" <<'PY' || fail "nan-weights: could not patch the fixture"
import json, struct, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
header_size = struct.unpack("<Q", data[:8])[0]
tensor = json.loads(data[8:8 + header_size])["model.layers.1.mlp.down_proj.weight"]
assert tensor["dtype"] == "F32"
at = 8 + header_size + tensor["data_offsets"][0] + 4 * 5  # element 5
data[at:at + 4] = struct.pack("<f", float("nan"))
open(path, "wb").write(bytes(data))
PY
expect nan-weights 2 1 "model.safetensors: tensor 'model.layers.1.mlp.down_proj.weight' holds NaN at flat element 5" \
  sft --model_name_or_path "$WORK/e7n" --dataset_name "$ROOT/examples/tiny-chat/train.jsonl" --max_length 128 --packing \
  --max_steps 1 --sharding zero3 --comm_progress none --output_dir "$WORK/e7m"
[ "$(grep -c "holds NaN" "$WORK/nan-weights.log")" -ge 2 ] || fail "nan-weights: not on every rank"
grep -q "learning_rate" "$WORK/nan-weights.log" && fail "nan-weights: the message still points at --learning_rate"
expect nan-generate 1 1 "holds NaN at flat element 5" generate "$WORK/e7n" --prompt "hi" --max_new_tokens 2

# Item 7: an unknown key (or a bad value) in --config YAML names the file and its line, not an unknown
# command-line option.
printf 'max_steps: 1\n# learning rate, misspelt\nlearning_rat: 1e-4\n' > "$WORK/bad_key.yaml"
expect yaml-unknown-key 2 1 "--config $WORK/bad_key.yaml:3: unknown option 'learning_rat'" \
  sft $TINY --config "$WORK/bad_key.yaml" --output_dir "$WORK/e7y"
grep -q "unrecognised option '--learning_rat'" "$WORK/yaml-unknown-key.log" && fail "yaml-unknown-key: still a -- option error"
printf 'max_steps: 1\nseed: twelve\n' > "$WORK/bad_value.yaml"
expect yaml-bad-value 1 1 "--config $WORK/bad_value.yaml:2: " sft $TINY --config "$WORK/bad_value.yaml" --output_dir "$WORK/e7y"

# Soak finding: a job killed while writing its first checkpoint leaves checkpoint-N.tmp only. That is
# no checkpoint, so the rerun (or --resume_from_checkpoint auto, as the SLURM requeue jobs do) starts
# afresh and removes it, instead of being refused as "holds checkpoints of an earlier run".
mkdir -p "$WORK/ek/checkpoint-2.tmp" && echo partial > "$WORK/ek/checkpoint-2.tmp/state.h5"
expect unfinished-save 2 0 "removed checkpoint-2.tmp from $WORK/ek: a checkpoint save that did not finish" \
  sft $TINY --max_steps 2 --save_steps 2 --output_dir "$WORK/ek" --resume_from_checkpoint auto
[ -f "$WORK/ek/checkpoint-2/manifest.json" ] || fail "unfinished-save: the rerun's checkpoint-2 is missing"

echo "$cases cases"
e2e_end
