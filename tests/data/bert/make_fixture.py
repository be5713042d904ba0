#!/usr/bin/env python3
"""Writes the Hugging Face BERT fixture of tests/bert (development tool, not a test dependency).

A tiny random BertForSequenceClassification (seeded) saved by transformers + safetensors as
model.safetensors + config.json, and the logits HF computes (eager attention, eval mode) for
fixed inputs with padding and token types, in expected.json. Run from this directory:
    python3 make_fixture.py
"""
import json

import torch
from transformers import BertConfig, BertForSequenceClassification

torch.manual_seed(1234)
config = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=37, max_position_embeddings=40, type_vocab_size=2, num_labels=3, initializer_range=0.3,
                    hidden_act="gelu", layer_norm_eps=1e-12, attn_implementation="eager")
model = BertForSequenceClassification(config).eval()
# Non-trivial LayerNorm and bias values (HF initialises them to 1 / 0).
with torch.no_grad():
    for name, p in model.named_parameters():
        if "LayerNorm" in name or name.endswith("bias"):
            p.add_(0.1 * torch.randn_like(p))
model.save_pretrained(".", safe_serialization=True)

input_ids = [[2, 17, 45, 98, 3, 0, 0, 0], [2, 5, 6, 7, 8, 9, 10, 3], [2, 33, 3, 0, 0, 0, 0, 0]]
attention_mask = [[1, 1, 1, 1, 1, 0, 0, 0], [1] * 8, [1, 1, 1, 0, 0, 0, 0, 0]]
token_type_ids = [[0, 0, 0, 1, 1, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1], [0] * 8]
with torch.no_grad():
    out = model(input_ids=torch.tensor(input_ids), attention_mask=torch.tensor(attention_mask),
                token_type_ids=torch.tensor(token_type_ids), output_hidden_states=True)
expected = {
    "input_ids": input_ids,
    "attention_mask": attention_mask,
    "token_type_ids": token_type_ids,
    "logits": out.logits.tolist(),
    # Last hidden state of the real (unpadded) tokens, flattened row by row.
    "last_hidden_state": out.hidden_states[-1].tolist(),
    "transformers": __import__("transformers").__version__,
    "torch": torch.__version__,
}
with open("expected.json", "w") as f:
    json.dump(expected, f)
print("logits", out.logits)
