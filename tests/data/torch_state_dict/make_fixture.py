#!/usr/bin/env python3
"""Writes the torch.save fixtures of tests/download (development tool: pip install torch).

- bert_random.bin / bert_random_legacy.bin: the tensors of tests/data/bert/model.safetensors
  (a tiny random BERT) as a PyTorch state dict (OrderedDict of tensors), saved by torch.save
  in its zip layout and in the legacy (pre-1.6) layout, plus an int64 position_ids buffer as
  old Hugging Face checkpoints carry it and the `_metadata` attribute nn.Module.state_dict()
  attaches. The test reads both and compares them, bit for bit,
  with the safetensors file.
- views.bin: tensors whose storage layout is not plain: a transposed view, an offset slice,
  two names sharing one storage, float16, bfloat16, float64 and bool tensors, and an
  nn.Parameter; views.json holds their values (float32 after widening) and shapes.
- evil.bin: torch.save of a dict holding an object whose pickle calls os.system; the
  restricted loader must refuse it (and never run it).

Run from anywhere:  python3 tests/data/torch_state_dict/make_fixture.py
"""
import collections
import json
import os
import struct

import torch

here = os.path.dirname(os.path.abspath(__file__))
bert = os.path.join(here, "..", "bert", "model.safetensors")

# safetensors read by hand (8-byte header length, JSON header, buffer): F32 only here.
with open(bert, "rb") as f:
    raw = f.read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
buf = raw[8 + n:]
sd = collections.OrderedDict()
for name in sorted(k for k in header if k != "__metadata__"):
    info = header[name]
    assert info["dtype"] == "F32", name
    b, e = info["data_offsets"]
    t = torch.frombuffer(bytearray(buf[b:e]), dtype=torch.float32).reshape(info["shape"]).clone()
    sd[name] = t
sd["bert.embeddings.position_ids"] = torch.arange(40, dtype=torch.int64).expand((1, -1))
# nn.Module.state_dict() attaches per-module versions as an attribute (pickled with BUILD).
sd._metadata = collections.OrderedDict([("", {"version": 1}), ("bert", {"version": 1})])
torch.save(sd, os.path.join(here, "bert_random.bin"))
torch.save(sd, os.path.join(here, "bert_random_legacy.bin"), _use_new_zipfile_serialization=False)

torch.manual_seed(27)
base = torch.randn(4, 6)
views = collections.OrderedDict()
views["transposed"] = base.t()                    # strides (1, 6)
views["slice"] = base[1:3, 2:5]                   # storage offset 8, strides (6, 1)
views["shared_a"] = base                          # same storage as the two above
views["half"] = torch.randn(5).half()
views["bf16"] = torch.randn(2, 3).bfloat16()
views["double"] = torch.tensor([0.5, -2.25, 1e-3], dtype=torch.float64).float().double()
views["mask"] = torch.tensor([True, False, True])
views["param"] = torch.nn.Parameter(torch.randn(3, 2))
views["scalar"] = torch.tensor(3.5)
torch.save(views, os.path.join(here, "views.bin"))
expected = {k: {"shape": list(v.shape), "values": [float(x) for x in v.detach().float().flatten().tolist()]}
            for k, v in views.items()}
with open(os.path.join(here, "views.json"), "w") as f:
    json.dump(expected, f, indent=1)
    f.write("\n")


class Evil:
    def __reduce__(self):
        return (os.system, ("echo qnum-test-pickle-ran > qnum-test-pickle-ran.txt",))


torch.save({"weight": torch.zeros(2), "payload": Evil()}, os.path.join(here, "evil.bin"))
