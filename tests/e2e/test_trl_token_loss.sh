#!/usr/bin/env bash
# --label_smoothing_factor and --loss_type dft end to end on the tiny-chat model (the losses themselves are
# checked against transformers' logits in unit.test_golden_token_loss and against finite differences in
# unit.test_cpu_token_loss / unit.test_model_gradcheck). Here, at the same untrained weights (eval_on_start's
# step-0 eval, and the first step's train loss), the logged losses must follow what LabelSmoother's
# formula implies whatever the logits are:
#   loss(eps) = (1 - eps) nll + eps S, linear in eps, with S = mean over tokens of mean_v(-log p_v) >= log V
#   (Jensen), and eps 0 gives the default run's losses exactly;
#   dft: each token's nll times p_y < 1, so below the nll; label smoothing is ignored under dft (as TRL).
# --tp_size 2 (the vocab-parallel loss, issue 42): eps 0.25 and dft on 2 ranks log the 1-process runs'
# step-0 eval and step-1 train losses within relative 1e-5 (same weights, only the summation order of
# the split vocabulary differs; the bound of tests/mpi/test_tensor_parallel_training.cpp's step 0).
# Refusal: --loss_type other than nll|dft, on 2 ranks alike before training.
source "$(dirname "$0")/lib.sh"
set -u
e2e_begin "$@"

TINY=(--model_config examples/tiny-chat/config.json --tokenizer examples/tiny-chat
      --dataset_name examples/tiny-chat/train.jsonl --eval_dataset examples/tiny-chat/eval.jsonl
      --dataset_cache_dir none --max_length 128 --max_steps 2 --logging_steps 1 --eval_on_start
      --eval_strategy steps --eval_steps 2)
run() {  # run NAME ARGS...: train into $WORK/NAME; prints nothing, the exit status is the run's
  local name=$1
  shift
  timeout 300 "$TRLHPC" sft "${TINY[@]}" --output_dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1
}
# first_losses NAME: the step-0 eval loss and the step-1 train loss, as logged.
first_losses() {
  python3 -c "
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
ev = [l['eval_loss'] for l in lines if 'eval_loss' in l and l['step'] == 0]
tr = [l['loss'] for l in lines if 'loss' in l and 'eval_loss' not in l and l['step'] == 1]
print(repr(ev[0]), repr(tr[0]))" "$WORK/$1/metrics.jsonl" 2>/dev/null
}

run default; check "default run (exit $?)" $?
run eps0 --label_smoothing_factor 0; check "eps 0 (exit $?)" $?
run eps25 --label_smoothing_factor 0.25; check "eps 0.25 (exit $?)" $?
run eps50 --label_smoothing_factor 0.5; check "eps 0.5 (exit $?)" $?
run dft --loss_type dft; check "loss_type dft (exit $?)" $?
run dft_eps --loss_type dft --label_smoothing_factor 0.5; check "dft with eps 0.5 (exit $?)" $?

read -r e0 t0 <<< "$(first_losses default)"
read -r z0 zt <<< "$(first_losses eps0)"
check "eps 0 logs the default run's losses exactly ($e0 $t0 / $z0 $zt)" \
  $([ -n "$e0" ] && [ "$e0" = "$z0" ] && [ "$t0" = "$zt" ]; echo $?)
# Every logged loss, eval loss and gradient norm of the eps-0 run is the default run's (the plain kernel path).
curve() {
  python3 -c "
import json, sys
for l in map(json.loads, open(sys.argv[1])):
    print(l['step'], *(repr(l[k]) for k in ('loss', 'eval_loss', 'grad_norm') if k in l))" "$WORK/$1/metrics.jsonl" 2>/dev/null
}
check "eps 0: the whole curve is the default run's" $([ -n "$(curve default)" ] && [ "$(curve default)" = "$(curve eps0)" ]; echo $?)
read -r e25 t25 <<< "$(first_losses eps25)"
read -r e50 t50 <<< "$(first_losses eps50)"
V=$(python3 -c "import json; print(json.load(open('examples/tiny-chat/config.json'))['vocab_size'])")
linear=$(python3 -c "
import math, sys
e0, e25, e50, t0, t25, t50, V = map(float, sys.argv[1:])
ok = True
for name, a, b, c in (('eval', e0, e25, e50), ('train', t0, t25, t50)):
    S = (b - 0.75 * a) / 0.25          # the smoothed term implied by eps 0.25
    pred = 0.5 * a + 0.5 * S           # what eps 0.5 must then log
    rel = abs(c - pred) / c
    print(f'{name}: nll {a:.6f} S {S:.6f} (log V {math.log(V):.6f}) eps 0.5 {c:.6f} predicted {pred:.6f} rel {rel:.1e}',
          file=sys.stderr)
    ok = ok and rel < 1e-5 and S >= math.log(V) - 1e-6 and b != a
sys.exit(0 if ok else 1)" "$e0" "$e25" "$e50" "$t0" "$t25" "$t50" "$V" 2>&1)
rc=$?
echo "    $linear" | tr '\n' ' '; echo
check "label smoothing: linear in eps, smoothed term >= log V, in eval and train" $rc

read -r d0 dt <<< "$(first_losses dft)"
read -r de dte <<< "$(first_losses dft_eps)"
check "dft: below the nll in eval and train ($d0 < $e0, $dt < $t0)" \
  $(python3 -c "import sys; a, b, c, d = map(float, sys.argv[1:]); sys.exit(not (0 < a < c and 0 < b < d))" \
      "${d0:-0}" "${dt:-0}" "${e0:-0}" "${t0:-0}"; echo $?)
check "dft ignores label smoothing, as TRL ($de $dte = $d0 $dt)" $([ -n "$d0" ] && [ "$de" = "$d0" ] && [ "$dte" = "$dt" ]; echo $?)

# Refusals, on 2 ranks alike, before training.
timeout 120 "$MPIRUN" --oversubscribe -np 2 "$TRLHPC" sft "${TINY[@]}" --output_dir "$WORK/bad" --loss_type dpo \
  > "$WORK/bad.log" 2>&1
rc=$?
check "--loss_type dpo refused on 2 ranks (exit $rc)" \
  $([ "$rc" -eq 1 ] && [ "$(grep -c "error: --loss_type dpo: use nll (cross-entropy) or dft" "$WORK/bad.log")" -eq 2 ]; echo $?)
for pair in "eps25 --label_smoothing_factor 0.25" "dft --loss_type dft"; do
  read -r ref args <<< "$pair"
  # shellcheck disable=SC2086  # args: the option and its value, split on purpose
  timeout 300 "$MPIRUN" --oversubscribe -np 2 "$TRLHPC" sft "${TINY[@]}" --output_dir "$WORK/tp_$ref" --tp_size 2 \
    $args > "$WORK/tp_$ref.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || sed 's/^/    /' "$WORK/tp_$ref.log" | tail -5
  read -r pe pt <<< "$(first_losses "tp_$ref")"
  read -r re rt <<< "$(first_losses "$ref")"
  check "$args with --tp_size 2 (exit $rc): the 1-process losses ($pe $pt / $re $rt)" \
    $([ "$rc" -eq 0 ] && python3 -c "import sys; a, b, c, d = map(float, sys.argv[1:]); \
sys.exit(not (abs(a - c) <= 1e-5 * abs(c) and abs(b - d) <= 1e-5 * abs(d)))" "${pe:-0}" "${pt:-0}" "${re:-1}" "${rt:-1}"; echo $?)
done
e2e_end
