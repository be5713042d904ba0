"""qnum inside PyTorch: MASE's transform passes on any torch.nn.Module (transformers models
included), qnum's formats as torch.library custom ops (torch.compile traces them with no
graph break), and MASE-semantics quantized modules.

    import qnum.torch as qt
    model, info = qt.quantize_transform_pass(model, {"by": "type", "default": {"config": {"name": None}},
                                                     "linear": {"config": {"name": "integer", "data_in_width": 8,
                                                                           "data_in_frac_width": 4, ...}}})
    print(info)                                   # MASE's summary table
    y = qt.fake_quantize(x, "mxint8")             # one tensor; straight-through gradient

float32, bfloat16 and float16 tensors, any layout (docs/python.md says what is rounded where).
"""
from ._ops import fake_quantize, format_of, quantize_op
from .functional import QuantizedMatmulMode, quantized_matmul, quantized_sdpa
from .modules import QuantLinear, QuantMixin, resolve
from .passes import (LoRALinear, QuantizeInfo, WeightMask, weight_mask, fuse_lora_weights_transform_pass, insert_lora_adapter_transform_pass,
                     prune_transform_pass, quantize_transform_pass, summarize)

__all__ = ["fake_quantize", "quantize_op", "format_of", "quant_config", "QuantLinear", "QuantMixin",
           "quantize_transform_pass", "prune_transform_pass", "insert_lora_adapter_transform_pass",
           "fuse_lora_weights_transform_pass", "summarize", "LoRALinear", "QuantizeInfo", "WeightMask", "weight_mask",
           "QuantizedMatmulMode", "quantized_matmul", "quantized_sdpa"]


def quant_config(config, where="QuantLinear"):
    """A MASE quantize config dict resolved by qnum's quantize pass rules: a dict with keys
    data_in, weight, bias, data_out (qnum.Format or None) and data_in_role."""
    r = resolve(config, where=where)
    return {"data_in_role": "weight" if r["data_in_role"] == 0 else "activation",
            **{o: None if r[o] is None else format_of(r[o]) for o in ("data_in", "weight", "bias", "data_out")}}
