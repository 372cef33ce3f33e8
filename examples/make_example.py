#!/usr/bin/env python3
"""Generates the bundled default of trlhpc: a synthetic instruction dataset, a byte-level BPE tokenizer
trained on it with the `tokenizers` library, and a small Qwen2-style model config.

    pip install tokenizers && python3 examples/make_example.py

Writes examples/tiny-chat/{train.jsonl, eval.jsonl, tokenizer.json, tokenizer_config.json,
config.json}. The outputs are committed, so users and CI never need Python; rerun only to change them.

The task is learnable by a ~1M-parameter model in a couple of CPU minutes, so the loss visibly falls:
deterministic answers (reversing words, sorting letters, adding small numbers, copying in upper case,
counting words) with a constant system prompt and a ChatML template whose {% generation %} blocks
let --assistant_only_loss train on the assistant turns only.
"""
import json
import os
import random

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny-chat")
WORDS = ("apple river stone cloud green small quick bright sun moon tree bird fish road house light dark "
         "blue red gold wind rain snow fire star hill lake song book door").split()
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' }}{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}{{ '\\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def task(rng):
    kind = rng.randrange(5)
    words = rng.sample(WORDS, rng.randint(2, 5))
    if kind == 0:
        return "Reverse the words: " + " ".join(words), " ".join(reversed(words))
    if kind == 1:
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        return f"What is {a} plus {b}?", f"{a} plus {b} is {a + b}."
    if kind == 2:
        w = rng.choice(WORDS)
        return f"Sort the letters of {w}.", "".join(sorted(w))
    if kind == 3:
        return "Say in capitals: " + " ".join(words), " ".join(words).upper()
    return "How many words: " + " ".join(words), f"There are {len(words)} words."


def conversation(rng):
    messages = [{"role": "system", "content": "You are a precise assistant."}]
    for _ in range(rng.randint(1, 3)):
        question, answer = task(rng)
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return {"messages": messages}


def main():
    os.makedirs(HERE, exist_ok=True)
    rng = random.Random(0)
    train = [conversation(rng) for _ in range(3000)]
    evaluation = [conversation(rng) for _ in range(100)]
    for name, rows in (("train.jsonl", train), ("eval.jsonl", evaluation)):
        with open(os.path.join(HERE, name), "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=1024, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    texts = (m["content"] for row in train for m in row["messages"])
    tok.train_from_iterator(texts, trainer)
    tok.save(os.path.join(HERE, "tokenizer.json"))
    vocab = tok.get_vocab_size()

    with open(os.path.join(HERE, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 512,
                   "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                   "chat_template": CHAT_TEMPLATE}, f, indent=1)
    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": vocab,
              "hidden_size": 128, "intermediate_size": 352, "num_hidden_layers": 4, "num_attention_heads": 4,
              "num_key_value_heads": 2, "max_position_embeddings": 512, "rms_norm_eps": 1e-6,
              "rope_theta": 10000.0, "tie_word_embeddings": True, "hidden_act": "silu",
              "initializer_range": 0.02, "use_sliding_window": False, "torch_dtype": "float32",
              "bos_token_id": tok.token_to_id("<|endoftext|>"), "eos_token_id": tok.token_to_id("<|im_end|>")}
    with open(os.path.join(HERE, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    print("vocab", vocab, "train rows", len(train))


if __name__ == "__main__":
    main()
