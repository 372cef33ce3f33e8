#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/<target>/ from the project's fixtures (small files only).

Run from the repository root: python3 tests/fuzz/make_seed_corpus.py. It only adds or overwrites the
seed-* files; inputs fuzzing found (named after what they exercise) are kept.
"""
import json
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"


def put(target, name, data, prefix="seed-"):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / (prefix + name)).write_bytes(data if isinstance(data, bytes) else data.encode())


def put_found(target, name, data):
    """An input that once crashed, hung or exhausted memory (issue 18's findings): replayed by CI."""
    put(target, name, data, prefix="found-")


def safetensors(tensors, metadata=None):
    header, blobs, offset = {}, b"", 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, fmt, values in tensors:
        blob = struct.pack("<" + fmt * len(values), *values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs += blob
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + blobs


def main():
    put("fuzz_safetensors", "f32.safetensors",
        safetensors([("model.norm.weight", "F32", [4], "f", [1, 2, 3, 4]),
                     ("lm_head.weight", "F32", [2, 2], "f", [0.5, -1, 2, 0])], {"format": "pt"}))
    put("fuzz_safetensors", "mixed.safetensors",
        safetensors([("a", "BF16", [2], "H", [0x3F80, 0x4000]), ("b", "I64", [1], "q", [7]),
                     ("c", "F16", [1, 1], "H", [0x3C00]), ("d", "F64", [], "d", [3.5])]))

    for jinja in sorted((ROOT / "tests/fixtures/chat_templates").glob("*.jinja")):
        put("fuzz_chat_template", jinja.name, jinja.read_bytes())

    for line_no, line in enumerate((ROOT / "examples/tiny-chat/train.jsonl").read_text().splitlines()[:3]):
        put("fuzz_chat_messages", f"tiny-chat-{line_no}.json", json.dumps(json.loads(line)["messages"]))
    put("fuzz_chat_messages", "tools.json", json.dumps([
        {"role": "system", "content": "sys"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": None, "reasoning_content": "think",
         "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": [1, 2.5, None]}}}]},
        {"role": "tool", "content": "42"}]))

    for name in ("bytelevel-gpt2", "sp-bytefallback"):
        put("fuzz_tokenizer_json", name + ".json", (ROOT / "tests/fixtures/tokenizers" / name / "tokenizer.json").read_bytes())
    put("fuzz_tokenizer_json", "minimal.json", json.dumps({
        "version": "1.0", "added_tokens": [{"id": 5, "content": "<|im_start|>", "special": True}],
        "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "post_processor": None, "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": {"H": 0, "e": 1, "He": 2, "l": 3, "o": 4}, "merges": ["H e"]}}))

    for i, text in enumerate(["Hello world! caf\u00e9 123", "<|im_start|>user\nhi<|im_end|>\n",
                              "  tabs\tand\nnewlines  ", "\u4f60\u597d\uff0c\u4e16\u754c \U0001F600"]):
        put("fuzz_tokenizer_encode", f"text-{i}.txt", text)
    put("fuzz_tokenizer_encode", "invalid-utf8.txt", b"ab\xff\xe2\x82cd\xc0\xaf")

    for yaml in sorted((ROOT / "configs").glob("*.yaml")):
        put("fuzz_accelerate_yaml", yaml.name, yaml.read_bytes())

    lines = (ROOT / "examples/tiny-chat/train.jsonl").read_text().splitlines()[:2]
    for readme in sorted((ROOT / "tests/fixtures/load_dataset").glob("*/README.md")):
        put("fuzz_dataset_card", readme.parent.name + ".md", readme.read_bytes())
    put("fuzz_dataset", "messages.jsonl", "\n" + "\n".join(lines) + "\n")  # leading newline: read as .jsonl
    put("fuzz_dataset", "text.jsonl", ' {"text": "one"}\n{"text": "two"}\n')
    put("fuzz_dataset", "prompt-completion.json", '[{"prompt": "2+2=", "completion": "4"}, {"prompt": "a", "completion": "b"}]')
    put("fuzz_dataset", "pretokenized.jsonl", ' {"input_ids": [1, 2, 3], "completion_mask": [0, 1, 1]}\n')
    put("fuzz_dataset", "conversational-pc.jsonl",
        ' {"prompt": [{"role": "user", "content": "q"}], "completion": [{"role": "assistant", "content": "a"}]}\n')

    put("fuzz_checkpoint_manifest", "manifest.json", json.dumps({
        "format": "trlhpc-checkpoint", "format_version": 1, "step": 3, "epoch": 0.5, "num_tokens": 1200,
        "sampler": {"epoch": 0, "step": 3}, "optimizer_step": 3,
        "identity": {"parameters": [["model.embed_tokens.weight", [64, 16]], ["lm_head.weight", [64, 16]]],
                     "model_config": {"hidden_size": 16, "num_hidden_layers": 1},
                     "tokenizer_fingerprint": "00000000deadbeef", "dataset": {"rows": 10, "tokens": 100},
                     "global_batch_size": 4},
        "run": {"mesh": {"dp_shard": 2}, "seed": 42}, "state_file": "state.h5",
        "datasets": {"params/lm_head.weight": {"shape": [64, 16], "checksum": "0123456789abcdef"}}}, indent=1))
    sums = {"params": "0123456789abcdef", "exp_avg": "0123456789abcdef", "exp_avg_sq": "0123456789abcdef"}
    put("fuzz_checkpoint_manifest", "manifest-v2.json", json.dumps({
        "format": "trlhpc-checkpoint", "format_version": 2, "step": 3, "epoch": 0.5, "num_tokens": 1200,
        "sampler": {"epoch": 0, "step": 3}, "optimizer_step": 3,
        "identity": {"parameters": [["model.embed_tokens.weight", [64, 16]], ["lm_head.weight", [64, 16]]],
                     "model_config": {"hidden_size": 16, "num_hidden_layers": 1},
                     "tokenizer_fingerprint": "00000000deadbeef", "dataset": {"rows": 10, "tokens": 100},
                     "global_batch_size": 4},
        "run": {"mesh": {"dp_shard": 2}, "seed": 42}, "state_file": "state.h5",
        "datasets": {k + "/unit-" + u: {"shape": [1024]} for k in sums for u in ("0", "2")},
        "tensors": {"model.embed_tokens.weight": {"unit": "unit-0", "offset": 0, "shape": [64, 16], "checksums": sums},
                    "lm_head.weight": {"unit": "unit-2", "offset": 0, "shape": [64, 16], "checksums": sums}}},
        indent=1))

    found_templates = {
        "int-arg-type.jinja": "{{ 'a'.replace('a','b','x') }}{{ 'a'|int(0,'x') }}{{ 1.5|round('x') }}",
        "tojson-indent.jinja": "{{ messages|tojson(indent=100000000000) }}",
        "repeat-list.jinja": "{{ [1]*10000000000 }}",
        "repeat-string.jinja": '{{ "ab"*100000000000 }}',
        "int-overflow.jinja": "{{ 9223372036854775807 + 1 }}{{ -(-9223372036854775807 - 1) }}",
        "nested-parens.jinja": "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",
        "nested-not.jinja": "{{ " + "not " * 5000 + "1 }}",
        "recursive-macro.jinja": "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
        "long-line.jinja": "{{ 1 }}" * 6000,
        "endless-loop.jinja": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "endless-loop-using-loop.jinja":
            "{% for i in range(100000) %}{% for j in range(100000) %}{{ loop.index0 }}{% endfor %}{% endfor %}",
        "namespace-cycle.jinja": "{% set ns = namespace(x=1) %}{% set ns.x = ns %}{{ ns }}",
    }
    for name, text in found_templates.items():
        put_found("fuzz_chat_template", name, text)
    put_found("fuzz_chat_messages", "deep-content.json",
              '[{"role": "user", "content": ' + "[" * 3000 + '"x"' + "]" * 3000 + "}]")
    minimal = json.loads((CORPUS / "fuzz_tokenizer_json" / "seed-minimal.json").read_text())
    minimal["model"]["vocab"]["o"] = 2147483647
    put_found("fuzz_tokenizer_json", "id-int32-max.json", json.dumps(minimal))
    minimal["model"]["vocab"]["o"] = 2000000000
    put_found("fuzz_tokenizer_json", "id-2e9.json", json.dumps(minimal))
    put_found("fuzz_accelerate_yaml", "non-scalar-key.yaml", "{[a]: 1}")
    put_found("fuzz_dataset", "number-out-of-range.jsonl", ' {"a": 1e999}\n{"text": "ok"}\n')
    put_found("fuzz_dataset", "deep-row.jsonl", ' {"a": ' + "[" * 1000 + "]" * 1000 + '}\n{"text": "ok"}\n')


if __name__ == "__main__":
    main()
