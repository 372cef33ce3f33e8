#!/usr/bin/env bash
# NEFTune (--neftune_noise_alpha, model/neftune.hpp) end to end on the TRL curve fixture (make_trl_curves.py's
# fp32_jsonl run: tiny Qwen2, 40 conversations, no packing, 10 steps):
#  1. against TRL: tests/fixtures/trl_curves/neftune.json holds TRL's loss curve with neftune_noise_alpha 5 for
#     8 seeds (8 independent draws of torch's noise; nothing else changes with the seed there). trlhpc's noise
#     is another draw of the same distribution (its Philox stream is not torch's), so its loss may lie from
#     TRL's mean as far as one more TRL draw does: at every step within 5 sigma of the 8 draws (sigma their
#     per-step standard deviation, 0.004-0.011 here), the 5 covering the small sample (with 8 draws the sample
#     sigma may be 0.6 of the true one). The same check rejects TRL's curve without NEFTune (up to 14 sigma
#     from the NEFTune mean at steps 3-10), so it sees whether the noise is there and of the right size.
#  2. alpha null: the run is the plain run, every logged value equal.
#  3. evaluation adds no noise: with eval_on_start the step-0 eval_loss of the NEFTune run is the plain one's.
#  4. layouts: 2 ranks (dp 2, one micro-step each), tp 2 and cp 2 train with the same noise as 1 rank (the draw
#     is keyed by the token's dataset row and column, not its rank): loss and grad_norm within 1e-5 relative
#     of the 1-rank run (fp32 reduction order only, the bound of the layout-equivalence tests).
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
FIXTURE=tests/fixtures/trl_curves
source tests/e2e/trl_curves_lib.sh
# trl_curves_lib's settings with the assistant-only loss (the fixture's fp32_jsonl setting)
SETTINGS=("${SETTINGS[@]/--assistant_only_loss=false/--assistant_only_loss=true}")
DATA=$FIXTURE/conversations.jsonl
EVAL=(--eval_dataset "$DATA" --eval_strategy steps --eval_steps 100 --eval_on_start true)

sft neftune "$DATA" --neftune_noise_alpha 5 "${EVAL[@]}"
sft plain "$DATA" "${EVAL[@]}"
sft alpha_null "$DATA" --neftune_noise_alpha null "${EVAL[@]}"
sft_np 2 neftune_dp2 "$DATA" --neftune_noise_alpha 5 --gradient_accumulation_steps=1
sft_np 2 neftune_tp2 "$DATA" --neftune_noise_alpha 5 --tp_size 2
sft_np 2 neftune_cp2 "$DATA" --neftune_noise_alpha 5 --cp_size 2

python3 - "$WORK" "$FIXTURE/neftune.json" <<'PY' || fail "NEFTune checks"
import json, statistics, sys
work, fixture = sys.argv[1], json.load(open(sys.argv[2]))

def lines(run):
    return [json.loads(l) for l in open(f"{work}/{run}/metrics.jsonl")]

def train(run):
    return [l for l in lines(run) if "loss" in l and "eval_loss" not in l]

bad = 0
assert fixture["alpha"] == 5.0, fixture["alpha"]
draws = list(fixture["runs"].values())
ours = train("neftune")
assert len(ours) == len(draws[0]) == 10, (len(ours), len(draws[0]))
plain_outside = 0
for i, step in enumerate(ours):
    trl = [d[i]["loss"] for d in draws]
    mean, sigma = statistics.mean(trl), statistics.pstdev(trl)
    z = abs(step["loss"] - mean) / sigma
    zp = abs(fixture["no_neftune"][i]["loss"] - mean) / sigma
    plain_outside += zp > 5
    print(f"    step {i + 1}: trlhpc {step['loss']:.5f}  TRL {mean:.5f} +- {sigma:.5f}  ({z:.1f} sigma; TRL without NEFTune {zp:.1f})")
    if z > 5:
        print(f"FAIL step {i + 1}: trlhpc's NEFTune loss is {z:.1f} sigma from TRL's"); bad += 1
if plain_outside < 5:
    print(f"FAIL the bound does not tell NEFTune from no NEFTune ({plain_outside} steps)"); bad += 1

keys = ("loss", "grad_norm", "entropy", "mean_token_accuracy")
for a, b in zip(train("alpha_null"), train("plain")):
    if any(a.get(k) != b.get(k) for k in keys):
        print(f"FAIL alpha null differs from the plain run at step {a['step']}"); bad += 1
eval0 = lambda run: [l["eval_loss"] for l in lines(run) if "eval_loss" in l and l["step"] == 0]
if not eval0("neftune") or eval0("neftune") != eval0("plain"):
    print(f"FAIL evaluation is not noise-free: step-0 eval_loss {eval0('neftune')} vs {eval0('plain')}"); bad += 1
if [l["loss"] for l in ours] == [l["loss"] for l in train("plain")]:
    print("FAIL --neftune_noise_alpha 5 changed nothing"); bad += 1

for run in ("neftune_dp2", "neftune_tp2", "neftune_cp2"):
    other = train(run)
    assert len(other) == len(ours), (run, len(other))
    worst = max(abs(o[k] - r[k]) / abs(r[k]) for o, r in zip(other, ours) for k in ("loss", "grad_norm"))
    print(f"    {run}: worst relative difference to 1 rank {worst:.2e}")
    if worst > 1e-5:
        print(f"FAIL {run}: NEFTune depends on the layout"); bad += 1
sys.exit(1 if bad else 0)
PY
e2e_end
