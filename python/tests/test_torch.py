"""qnum on PyTorch tensors: output kinds, zero-copy, the fake_quantize Function's straight-
through gradients (identity and clipped), QuantLinear with MASE's config keys, and errors.
Skipped when torch is not importable."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import qnum  # noqa: E402
import qnum.torch as qt  # noqa: E402
from conftest import assert_same_bits  # noqa: E402


def test_tensor_in_tensor_out_same_bits_as_numpy():
    x = torch.randn(4, 64)
    f = qnum.Format("mxfp8_e4m3")
    y = f.quantize(x)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32 and y.shape == x.shape
    assert_same_bits(y.numpy(), f.quantize(x.numpy()), "torch vs numpy")


def test_zero_copy_in_place_tensor():
    x = torch.randn(8, 64)
    want = qnum.Format("integer:width=8,frac_width=4").quantize(x)
    ptr = x.data_ptr()
    out = qnum.Format("integer:width=8,frac_width=4").quantize(x, out=x)
    assert out is x and x.data_ptr() == ptr
    assert torch.equal(x, want)


def test_non_contiguous_tensor_is_copied_once():
    x = torch.randn(32, 16).t()
    assert not x.is_contiguous()
    f = qnum.Format("integer:width=6,frac_width=3")
    assert torch.equal(f.quantize(x), f.quantize(x.contiguous()))


def test_tensor_errors():
    with pytest.raises(TypeError, match="float64"):
        qnum.mase.integer_quantizer(torch.zeros(3, dtype=torch.float64), 8, 4)
    with pytest.raises(TypeError, match="bfloat16"):
        qnum.Format("integer:width=8").quantize(torch.zeros(3, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="same kind"):
        qnum.Format("integer:width=8").quantize(torch.zeros(3), out=np.zeros(3, np.float32))


def test_fake_quantize_identity_ste():
    x = torch.randn(5, 7, requires_grad=True)
    y = qt.fake_quantize(x, "integer:width=4,frac_width=2")
    assert torch.equal(y.detach(), qnum.Format("integer:width=4,frac_width=2").quantize(x.detach()))
    g = torch.randn(5, 7)
    y.backward(g)
    assert torch.equal(x.grad, g)


def test_fake_quantize_clipped_ste():
    x = torch.tensor([-10.0, -2.0, -1.9, 0.3, 1.75, 1.8, 5.0, float("nan")], requires_grad=True)
    fmt = qnum.Format("integer:width=4,frac_width=2,ste=clipped")  # range [-2, 1.75]
    assert fmt.describe()["ste_range"] == (-2.0, 1.75)
    y = qt.fake_quantize(x, fmt)
    y.backward(torch.ones(8))
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]


def test_mase_gradient_matches_mase_formula_in_torch_ops():
    # MASE's integer_quantizer: forward clamp(round(x * 2^f)) / 2^f, backward the identity
    x = torch.randn(1000, requires_grad=True)
    y = qnum.mase.integer_quantizer(x, 8, 4)
    want = torch.clamp(torch.round(x.detach() * 16), -128, 127) / 16
    assert torch.equal(y.detach(), want)
    g = torch.randn(1000)
    y.backward(g)
    assert torch.equal(x.grad, g)


def test_mase_binarize_hard_tanh_gradient():
    x = torch.tensor([-3.0, -1.0, -0.2, 0.0, 0.5, 1.0, 2.0], requires_grad=True)
    y = qnum.mase.binarize(x)
    c = torch.clamp(x.detach(), -1, 1)
    assert torch.equal(y.detach(), torch.sign(c))
    y.backward(torch.ones(7))
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]


def test_residual_sign_means_gradient_as_mase():
    x = torch.randn(40, requires_grad=True)
    means = torch.tensor([0.7, 0.3], requires_grad=True)
    y = qnum.mase.residual_sign_quantizer(2, None, means, x)
    # MASE's graph in torch ops
    xr, mr = x.detach().clone().requires_grad_(True), means.detach().clone().requires_grad_(True)
    resid, outs = xr, []
    for level in range(2):
        c = torch.clamp(resid, -1, 1)
        o = (c + (torch.sign(c) - c).detach()) * torch.abs(mr[level])
        resid = resid - o
        outs.append(o)
    ref = torch.stack(outs)
    assert_same_bits(y.detach().numpy(), ref.detach().numpy(), "residual_sign forward")
    g = torch.randn(2, 40)
    y.backward(g)
    ref.backward(g)
    assert_same_bits(x.grad.numpy(), xr.grad.numpy(), "d/dx")
    assert_same_bits(means.grad.numpy(), mr.grad.numpy(), "d/dmeans")


MASE_INT8 = {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8,
             "weight_frac_width": 6, "bias_width": 8, "bias_frac_width": 6}


def test_quant_linear_forward_is_linear_of_quantized_operands():
    torch.manual_seed(0)
    layer = qt.QuantLinear(16, 8, config=MASE_INT8)
    x = torch.randn(4, 16)
    want = torch.nn.functional.linear(qnum.mase.integer_quantizer(x, 8, 4),
                                      qnum.mase.integer_quantizer(layer.weight.detach(), 8, 6),
                                      qnum.mase.integer_quantizer(layer.bias.detach(), 8, 6))
    assert torch.equal(layer(x).detach(), want)
    assert "integer:width=8,frac_width=6" in repr(layer)


def test_quant_linear_trains_one_step():
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    for i, m in enumerate(model):
        if isinstance(m, torch.nn.Linear):
            model[i] = qt.QuantLinear.from_linear(m, MASE_INT8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, target = torch.randn(64, 16), torch.randint(0, 4, (64,))
    before = [p.detach().clone() for p in model.parameters()]
    loss = torch.nn.functional.cross_entropy(model(x), target)
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    opt.step()
    assert all(not torch.equal(a, p.detach()) for a, p in zip(before, model.parameters()))


def test_quant_linear_config_errors_and_float():
    with pytest.raises(ValueError, match="unknown key 'weigth_width'"):
        qt.QuantLinear(4, 4, config={"name": "integer", "weigth_width": 8})
    with pytest.raises(ValueError, match="no 'name'"):
        qt.QuantLinear(4, 4, config={"weight_width": 8})
    plain = qt.QuantLinear(4, 3, config={"name": "integer", "bypass": True})
    x = torch.randn(2, 4)
    assert torch.equal(plain(x), torch.nn.functional.linear(x, plain.weight, plain.bias))


def test_docs_python_md_training_script_runs():
    """The qnum.torch script of docs/python.md (a transformers BERT: quantize, one QAT step,
    prune, LoRA, summarize), run as written."""
    pytest.importorskip("transformers")
    from conftest import REPO
    text = (REPO / "docs" / "python.md").read_text()
    script = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert "quantize_transform_pass" in script and "opt.step()" in script
    namespace = {}
    exec(compile(script, "docs/python.md", "exec"), namespace)
    info = namespace["info"]
    assert len(info.changed()) == 14 and namespace["loss"].item() > 0 and namespace["n"] == 4
    assert all(isinstance(m, qt.QuantLinear) for m in namespace["qmodel"].modules()
               if isinstance(m, torch.nn.Linear))


def test_mase_statistics_as_tensors():
    # MASE's profiled statistics may be 0-d tensors; they are accepted (and unused, as MASE's rule)
    x = torch.randn(2, 3, 4, 4)
    plain = qnum.mase.ternary_quantizer(x, threshold=0.5)
    for _ in range(3):
        assert torch.equal(qnum.mase.ternary_quantizer(x, threshold=torch.tensor(0.5), mean=torch.tensor(0.1)), plain)


def test_quant_linear_mase_block_fp_matches_mase_functions():
    cfg = {"name": "block_fp", "data_in_width": 8, "data_in_exponent_width": 8, "data_in_block_size": [1, 16],
           "weight_width": 8, "weight_exponent_width": 8, "weight_block_size": [1, 16], "mode": "mase"}
    torch.manual_seed(2)
    layer = qt.QuantLinear(32, 8, config=cfg)
    x = torch.randn(4, 32, requires_grad=True)
    y = layer(x)
    w = qnum.mase.block_fp_quantizer(layer.weight.detach(), 8, 8, None, [1, 16], skip_first_dim=False)
    xi = qnum.mase.block_fp_quantizer(x.detach(), 8, 8, None, [1, 16], skip_first_dim=True)
    assert torch.equal(y.detach(), torch.nn.functional.linear(xi, w, layer.bias.detach()))
    y.sum().backward()
    x2 = x.detach().clone().requires_grad_(True)  # STE: the input gradient of linear(x, q(W), b)
    torch.nn.functional.linear(x2, w, layer.bias.detach()).sum().backward()
    assert torch.equal(x.grad, x2.grad)
