#!/usr/bin/env python3
"""Learning-rate schedules from transformers' get_scheduler, for tests/unit/test_lr_scheduler.cpp.

    python3 tests/golden/make_scheduler_fixture.py   (needs torch + transformers)

Writes tests/golden/schedulers.json: for each (type, total steps, warmup) the lr that
torch.optim's param group holds before each optimizer step (what the step uses), base lr 1e-3.
"""
import json
import os

import torch
from transformers import get_scheduler
from transformers.trainer_utils import SchedulerType

CASES = [("linear", 20, 0), ("linear", 20, 5), ("cosine", 30, 3), ("cosine", 7, 0),
         ("constant", 10, 0), ("constant_with_warmup", 12, 4), ("linear", 5, 10)]


def main():
    out = []
    for name, total, warmup in CASES:
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
        sched = get_scheduler(SchedulerType(name), opt, num_warmup_steps=warmup, num_training_steps=total)
        lrs = []
        for _ in range(total):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        out.append({"type": name, "total": total, "warmup": warmup, "base_lr": 1e-3, "lrs": lrs})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schedulers.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
