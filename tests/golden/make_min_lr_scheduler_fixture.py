#!/usr/bin/env python3
"""cosine_with_min_lr and cosine with num_cycles, from transformers' own lr lambda, for
tests/unit/test_lr_scheduler.cpp.

    python3 tests/golden/make_min_lr_scheduler_fixture.py   (needs transformers' source, not torch)

transformers.optimization imports torch, which this fixture does without: the pure-Python lambda
`_get_cosine_schedule_with_warmup_lr_lambda` (what get_scheduler's LambdaLR multiplies the base lr by) is
taken from the installed optimization.py with ast and run as it is. The arguments follow get_scheduler:
scheduler_specific_kwargs (TrainingArguments.lr_scheduler_kwargs) min_lr becomes min_lr_rate = min_lr /
base lr, num_cycles defaults to 0.5. Writes tests/golden/schedulers_min_lr.json: per case the lr before
each optimizer step (LambdaLR: base_lr * lambda(step), step 0 first), base lr 1e-3.
"""
import ast
import importlib.util
import json
import math
import os
import pathlib

import transformers

SOURCE = pathlib.Path(importlib.util.find_spec("transformers.optimization").origin)
LAMBDA = "_get_cosine_schedule_with_warmup_lr_lambda"
BASE_LR = 1e-3
# (type, total steps, warmup, lr_scheduler_kwargs)
CASES = [("cosine_with_min_lr", 20, 3, {"min_lr_rate": 0.1}),
         ("cosine_with_min_lr", 9, 0, {"min_lr": 2.5e-4}),
         ("cosine_with_min_lr", 12, 2, {"min_lr_rate": 0.05, "num_cycles": 1.0}),
         ("cosine", 10, 1, {"num_cycles": 0.25})]


def load_lambda():
    tree = ast.parse(SOURCE.read_text())
    # optimization.py defines it twice; the module (and so get_scheduler, which looks the name up when it
    # runs) has the last definition, the one with min_lr_rate.
    for node in reversed(tree.body):
        if isinstance(node, ast.FunctionDef) and node.name == LAMBDA:
            namespace = {"math": math}
            exec(compile(ast.Module(body=[node], type_ignores=[]), str(SOURCE), "exec"), namespace)
            return namespace[LAMBDA]
    raise SystemExit(f"{LAMBDA} not found in {SOURCE}")


def main():
    lr_lambda = load_lambda()
    out = []
    for name, total, warmup, kwargs in CASES:
        rate = kwargs.get("min_lr_rate", kwargs["min_lr"] / BASE_LR if "min_lr" in kwargs else 0.0)
        cycles = kwargs.get("num_cycles", 0.5)
        lrs = [BASE_LR * lr_lambda(step, num_warmup_steps=warmup, num_training_steps=total, num_cycles=cycles,
                                   min_lr_rate=rate) for step in range(total)]
        out.append({"type": name, "total": total, "warmup": warmup, "base_lr": BASE_LR, "kwargs": kwargs, "lrs": lrs})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schedulers_min_lr.json")
    with open(path, "w") as f:
        json.dump({"transformers": transformers.__version__, "cases": out}, f, indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
