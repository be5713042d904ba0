"""Writes the safetensors interoperability fixtures read by tests/io/test_safetensors.cpp.

Run from anywhere: `python3 tests/data/safetensors/make_fixtures.py` (needs numpy, torch and
safetensors). Values are chosen so every F16/BF16 value is exact in float32 and easy to
state in the C++ test: they include signed zero, subnormals, the largest finite value,
infinities and a NaN. No random values; only the order of the __metadata__ keys in
mixed.safetensors may change between runs (the Rust writer keeps them in a hash map).
"""
import os

import numpy as np
import torch
from safetensors.numpy import save_file as save_numpy
from safetensors.torch import save_file as save_torch

HERE = os.path.dirname(os.path.abspath(__file__))

# mixed.safetensors: F32 (2-D, 1-D, scalar, empty), F16 and BF16, with metadata.
f16 = np.array([0.0, -0.0, 1.0, -2.5, 65504.0, 2.0**-24, 2.0**-14, 0.333251953125, np.inf, -np.inf],
               dtype=np.float16)
bf16 = torch.tensor([[1.0, -3.0, 0.0078125], [3.3895313892515355e38, 9.183549615799121e-41, -0.0]],
                    dtype=torch.bfloat16)
save_torch(
    {
        "weight": torch.arange(12, dtype=torch.float32).reshape(3, 4) * 0.5 - 2.0,
        "bias": torch.tensor([1.5, -0.25, 3e38], dtype=torch.float32),
        "step": torch.tensor(7.0, dtype=torch.float32),
        "empty": torch.zeros((0, 3), dtype=torch.float32),
        "half": torch.from_numpy(f16),
        "brain": bf16,
        "rank4": torch.arange(16, dtype=torch.float32).reshape(1, 2, 2, 4),
    },
    os.path.join(HERE, "mixed.safetensors"),
    metadata={"format": "pt", "model": "jsc-tiny", "epoch": "3"},
)

# nan_f16.safetensors: a quiet NaN in F16 (numpy, no metadata).
save_numpy({"x": np.array([np.nan, 1.0], dtype=np.float16)}, os.path.join(HERE, "nan_f16.safetensors"))

# rank5_f32.safetensors: valid for safetensors, but above qnum's rank limit of 4.
save_numpy({"t": np.zeros((1, 1, 1, 1, 2), dtype=np.float32)}, os.path.join(HERE, "rank5_f32.safetensors"))
