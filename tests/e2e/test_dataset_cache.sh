#!/usr/bin/env bash
# The tokenized-dataset cache (--dataset_cache_dir, default <output_dir>/.dataset_cache): the first
# 2-rank run writes it (rank 0 logs "dataset cache written"), the second loads it ("dataset cache hit")
# and trains to exactly the same losses; a corrupt cache file is a miss (a warning, then rewritten).
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

run() {  # run NAME: one 2-rank training run into $WORK/out, log in $WORK/NAME.log, metrics kept
  rm -f "$WORK/out/metrics.jsonl"  # appended to across runs
  trlhpc_np 300 2 sft --config examples/tiny-chat/sft.yaml --max_steps 2 \
    --output_dir "$WORK/out" >"$WORK/$1.log" 2>&1
  local rc=$?
  cp "$WORK/out/metrics.jsonl" "$WORK/$1.metrics.jsonl" 2>/dev/null
  if [ "$rc" -ne 0 ]; then fail "$1: exit $rc"; sed 's/^/    /' "$WORK/$1.log" | tail -20; fi
}

same_losses() {  # same_losses A B: identical loss / eval_loss sequences
  same_metrics "$WORK/$1.metrics.jsonl" "$WORK/$2.metrics.jsonl" 0 loss eval_loss
}

run first
written=$(grep -c "dataset cache written:" "$WORK/first.log")
[ "$written" -eq 2 ] || fail "first run: 'dataset cache written' printed $written times (want 2: train + eval)"
grep -q "dataset cache hit" "$WORK/first.log" && fail "first run: unexpected cache hit"
tokens=$(ls "$WORK/out/.dataset_cache/"*.tokens 2>/dev/null | wc -l)
[ "$tokens" -eq 2 ] || fail "first run: $tokens cache files in out/.dataset_cache (want 2)"

run second
hits=$(grep -c "dataset cache hit:" "$WORK/second.log")
[ "$hits" -eq 2 ] || fail "second run: 'dataset cache hit' printed $hits times (want 2)"
grep -q "dataset cache written" "$WORK/second.log" && fail "second run: cache rewritten"
same_losses first second || fail "second run: losses differ from the first run's"

# A corrupt cache file: a one-line warning, tokenized again, same losses.
for f in "$WORK/out/.dataset_cache/"*.tokens; do printf 'garbage' > "$f"; done
run corrupt
grep -q "ignored (bad magic)" "$WORK/corrupt.log" || fail "corrupt run: no 'ignored (bad magic)' warning"
[ "$(grep -c "dataset cache written:" "$WORK/corrupt.log")" -eq 2 ] || fail "corrupt run: cache not rewritten"
same_losses first corrupt || fail "corrupt run: losses differ from the first run's"

e2e_end && echo "ok: cache written, hit, corrupt file rebuilt; identical losses"
