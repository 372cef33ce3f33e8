#!/usr/bin/env bash
# `trlhpc tokenize` on the bundled conversational dataset with --assistant_only_loss: for each row the
# trained tokens, decoded, must be exactly each assistant message followed by the template's <|im_end|>
# (derived independently from the dataset JSON), and the rendered text must contain every message.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
head -n 25 "$ROOT/examples/tiny-chat/train.jsonl" > "$WORK/rows.jsonl"
"$TRLHPC" tokenize --tokenizer "$ROOT/examples/tiny-chat" --dataset_name "$WORK/rows.jsonl" --assistant_only_loss --chat > "$WORK/out.jsonl" ||
  fatal "trlhpc tokenize exited $?"
python3 - "$WORK/rows.jsonl" "$WORK/out.jsonl" <<'PY' || fail "the trained tokens are not the assistant messages"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
outs = [json.loads(l) for l in open(sys.argv[2])]
assert len(rows) == len(outs), (len(rows), len(outs))
# Byte-level BPE pieces: map the GPT-2 byte alphabet back to bytes.
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
unbyte = {chr(c): b for b, c in zip(bs, cs)}
def decode(pieces):
    out = b""
    for p in pieces:
        out += p.encode() if p.startswith("<|") else bytes(unbyte[ch] for ch in p)
    return out.decode()
failures = 0
for i, (row, out) in enumerate(zip(rows, outs)):
    want = "".join(m["content"] + "<|im_end|>" for m in row["messages"] if m["role"] == "assistant")
    got = decode([t for t, m in zip(out["tokens"], out["loss_mask"]) if m])
    marked_ok = all("[[" + m["content"] + "<|im_end|>]]" in out["marked"] for m in row["messages"] if m["role"] == "assistant")
    if got != want or not marked_ok or any(m["content"] not in out["text"] for m in row["messages"]):
        failures += 1
        print(f"row {i}: trained text {got!r} != {want!r}")
print(f"{len(rows) - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
PY
e2e_end
