"""TensorBoard's own reader on a qnum run's log: every scalar of metrics.jsonl is in the event
files, on its step, with its value (as float32), and nothing else is.

check_tensorboard.py LOGDIR METRICS_JSONL STEPS_PER_EPOCH
"""
import json
import sys

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main(logdir, metrics, steps_per_epoch):
    acc = EventAccumulator(logdir, size_guidance={"scalars": 0})  # 0: keep every event
    acc.Reload()
    logged = {}
    for tag in acc.Tags()["scalars"]:
        for e in acc.Scalars(tag):
            key = (tag, e.step)
            assert key not in logged, f"{tag} at step {e.step} logged twice"
            logged[key] = e.value
    want = {}
    for line in open(metrics):
        row = json.loads(line)
        if "step" in row:
            s = row["step"]
            want[("train/loss", s)] = row["loss"]
            want[("train/learning_rate", s)] = row["learning_rate"]
            want[("train/epoch", s)] = None  # fractional epoch: checked below
            if "grad_norm" in row:
                want[("train/grad_norm", s)] = row["grad_norm"]
        else:
            s = row["epoch"] * steps_per_epoch
            want[("train/epoch_loss", s)] = row["train_loss"]
            want[("eval/loss", s)] = row["val_loss"]
            want[("eval/accuracy", s)] = row["val_accuracy"]
    assert set(logged) == set(want), f"tags/steps differ: extra {sorted(set(logged) - set(want))[:5]}, " \
                                     f"missing {sorted(set(want) - set(logged))[:5]}"
    for key, value in want.items():
        if value is None:
            value = key[1] / steps_per_epoch
        assert logged[key] == np.float32(value), f"{key}: TensorBoard {logged[key]}, metrics.jsonl {value}"
    print(f"tensorboard: {len(logged)} scalars of {len(acc.Tags()['scalars'])} tags read back")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
