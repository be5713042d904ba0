"""qnum.torch's model-level passes on real model definitions (transformers' BERT, GPT-2 and a
Llama-style decoder built from small configs with random weights, a CNN): by type, by name,
by regex; every quantized module's output bit-equal to MASE's formula on the same tensors;
straight-through gradients; pruning counts and selection; LoRA; summarize; dtypes; bad input."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
import qnum  # noqa: E402
import qnum.torch as qt  # noqa: E402

from conftest import assert_same_bits  # noqa: E402

transformers = pytest.importorskip("transformers")

INT8 = {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8, "weight_frac_width": 7,
        "bias_width": 8, "bias_frac_width": 5}
MXINT8_MASE = {"name": "mxint", "mode": "mase", "data_in_block_size": [32], "data_in_element_bits": 8,
               "weight_block_size": [32], "weight_element_bits": 8}


def by_type(**ops):
    cfg = {"by": "type", "default": {"config": {"name": None}}}
    cfg.update({op: {"config": c} for op, c in ops.items()})
    return cfg


# ---- MASE's formulas, written as MASE writes them (chop.nn.quantizers) -----------------------

def mase_integer(x, width, frac_width):
    """MASE's integer_quantizer: clamp(round(x · 2^f), -2^(w-1), 2^(w-1) - 1) / 2^f in float32."""
    scale = 2.0 ** frac_width
    lo, hi = -(2 ** (width - 1)), 2 ** (width - 1) - 1
    return torch.clamp(torch.round(x.float() * scale), lo, hi) / scale


def mase_mxint(x, block_size, element_bits):
    """MASE's mxint_quantizer (block_dim = -1, scale_bits = 8, no quantile search)."""
    shape = x.shape
    xf = x.float().reshape(-1, shape[-1])
    n = xf.shape[-1]
    pad = (-n) % block_size
    if pad:
        xf = F.pad(xf, (0, pad))
    blocks = xf.reshape(xf.shape[0], -1, block_size)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    exponent = torch.floor(torch.log2(amax)).clamp(-127, 127)
    exponent = torch.where(amax == 0, torch.zeros_like(exponent), exponent)
    scale = torch.pow(torch.tensor(2.0), exponent - (element_bits - 2))
    q = torch.clamp(torch.round(blocks / scale), -(2 ** (element_bits - 1)), 2 ** (element_bits - 1) - 1) * scale
    return q.reshape(xf.shape)[:, :n].reshape(shape)


def int8_ref(x, which):
    c = INT8
    return mase_integer(x, c[f"{which}_width"], c[f"{which}_frac_width"])


# ---- model factories (random weights, no downloads) ------------------------------------------

def tiny_bert(**kw):
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=64, **kw)
    return transformers.BertForSequenceClassification(cfg).eval()


def tiny_gpt2():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=120, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                  bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg).eval()


def tiny_llama():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=120, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg).eval()


def tiny_cnn():
    torch.manual_seed(0)
    try:
        import torchvision
        return torchvision.models.resnet18(weights=None, num_classes=10).eval()
    except ImportError:
        return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                   torch.nn.Conv2d(8, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                   torch.nn.LazyLinear(10)).eval()


def tokens(batch=2, seq=12):
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 120, (batch, seq), generator=g)


def capture(model, kinds):
    """Records (module, input, output) of every module of the given classes on the next forward."""
    seen, hooks = [], []
    for name, m in model.named_modules():
        if isinstance(m, kinds):
            hooks.append(m.register_forward_hook(lambda mod, a, out, name=name: seen.append((name, mod, a[0], out))))
    return seen, hooks


# ---- quantize: Hugging Face models ------------------------------------------------------------

def test_bert_by_type_quantizes_every_linear_and_leaves_the_input_model_alone():
    model = tiny_bert()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    q, info = qt.quantize_transform_pass(model, by_type(linear=INT8))
    linears = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    assert sorted(info.changed()) == sorted(linears) and len(linears) == 2 * 6 + 2
    text = str(info)
    assert "| Original type" in text and "| Linear" in text
    row = [line for line in text.splitlines() if line.startswith("| Linear ")][0]
    assert [c.strip() for c in row.split("|")[3:6]] == [str(len(linears)), str(len(linears)), "0"]
    # the input model is untouched; the copy has the same state_dict keys and values
    assert all(type(m) is torch.nn.Linear for n, m in model.named_modules() if n in linears)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert set(q.state_dict()) == set(before)
    assert all(isinstance(q.get_submodule(n), qt.QuantLinear) for n in linears)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bert_linear_outputs_equal_mase_formula(dtype):
    model = tiny_bert().to(dtype)
    q, _ = qt.quantize_transform_pass(model, by_type(linear=INT8))
    seen, hooks = capture(q, torch.nn.Linear)
    logits = q(input_ids=tokens()).logits
    for h in hooks:
        h.remove()
    assert logits.dtype == dtype and len(seen) == 14
    for name, mod, x, out in seen:
        want = F.linear(int8_ref(x, "data_in").to(dtype), int8_ref(mod.weight, "weight").to(dtype),
                        int8_ref(mod.bias, "bias").to(dtype))
        assert_same_bits(out.detach().float(), want.detach().float(), name)


def test_mx_and_nvfp4_configs_change_every_linear():
    model = tiny_bert()
    for cfg in (MXINT8_MASE, {"name": "mxint8", "data_in": "mxint8", "weight": "mxint8"},
                {"name": "nvfp4", "data_in": "nvfp4", "weight": "nvfp4"}):
        q, info = qt.quantize_transform_pass(model, by_type(linear=cfg))
        assert len(info.changed()) == 14, cfg
        assert torch.isfinite(q(input_ids=tokens()).logits).all()


def test_bert_mxint_mase_mode_equals_mase_formula():
    q, _ = qt.quantize_transform_pass(tiny_bert(), by_type(linear=MXINT8_MASE))
    seen, hooks = capture(q, torch.nn.Linear)
    q(input_ids=tokens())
    for h in hooks:
        h.remove()
    for name, mod, x, out in seen:
        want = F.linear(mase_mxint(x, 32, 8), mase_mxint(mod.weight, 32, 8), mod.bias)
        assert_same_bits(out.detach(), want.detach(), name)


def test_gpt2_conv1d_is_quantized_as_the_linear_it_is():
    model = tiny_gpt2()
    q, info = qt.quantize_transform_pass(model, by_type(linear=INT8))
    conv1d = [n for n, m in model.named_modules() if type(m).__name__ == "Conv1D"]
    assert len(conv1d) == 8 and set(conv1d) <= set(info.changed())
    assert "lm_head" in info.changed()
    seen, hooks = capture(q, transformers.pytorch_utils.Conv1D)
    q(input_ids=tokens())
    for h in hooks:
        h.remove()
    assert len(seen) == 8
    for name, mod, x, out in seen:
        w = int8_ref(mod.weight.t(), "weight").t()  # [in, out] stored, quantized as [out, in]
        want = torch.addmm(int8_ref(mod.bias, "bias"), int8_ref(x, "data_in").reshape(-1, x.shape[-1]), w)
        assert_same_bits(out.detach(), want.detach().reshape(out.shape), name)
    assert isinstance(q.get_submodule(conv1d[0]), transformers.pytorch_utils.Conv1D)


def test_llama_gqa_decoder_rmsnorm_and_matmuls():
    model = tiny_llama()
    q, info = qt.quantize_transform_pass(model, by_type(linear=INT8, rms_norm={"name": "integer",
                                                                               "data_in_width": 8,
                                                                               "data_in_frac_width": 4},
                                                     matmul={"name": "integer", "data_in_width": 8,
                                                             "data_in_frac_width": 4, "weight_width": 8,
                                                             "weight_frac_width": 4}))
    norms = [n for n, m in model.named_modules() if type(m).__name__.endswith("RMSNorm")]
    assert norms and set(norms) <= set(info.changed())
    assert any(r["op"] == "matmul" and r["changed"] for r in info.rows)
    out = q(input_ids=tokens()).logits
    plain = model(input_ids=tokens()).logits
    assert torch.isfinite(out).all() and not torch.equal(out, plain)


def test_matmul_calls_quantized_by_type():
    class Attn(torch.nn.Module):
        def forward(self, a, b, c):
            return torch.bmm(a @ b, c)

    a, b, c = torch.randn(2, 4, 8), torch.randn(2, 8, 4), torch.randn(2, 4, 3)
    int4 = {"name": "integer", "data_in_width": 6, "data_in_frac_width": 3, "weight_width": 6,
            "weight_frac_width": 3}
    q, info = qt.quantize_transform_pass(Attn(), by_type(matmul=int4, bmm=int4))
    got = q(a, b, c)
    qi = lambda t: mase_integer(t, 6, 3)
    want = torch.bmm(qi(qi(a) @ qi(b)), qi(c))
    assert_same_bits(got, want, "matmul then bmm")
    assert any("matmul call" in n for n in info.notes)


def test_bert_sdpa_products_quantized_like_eager_attention():
    cfg = {"name": "integer", "data_in_width": 8, "data_in_frac_width": 5, "weight_width": 8,
           "weight_frac_width": 5}
    outs = []
    for impl in ("sdpa", "eager"):
        model = tiny_bert(attn_implementation=impl)
        q, _ = qt.quantize_transform_pass(model, by_type(matmul=cfg))
        outs.append(q(input_ids=tokens()).logits)
        assert not torch.equal(outs[-1], model(input_ids=tokens()).logits)
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-4, atol=1e-5)


def test_cnn_conv2d_outputs_equal_mase_formula():
    model = tiny_cnn()
    x = torch.randn(2, 3, 32, 32)
    model(x)  # materialises a LazyLinear where torchvision is absent
    cfg = {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8,
           "weight_frac_width": 6, "bias_width": 8, "bias_frac_width": 6}
    q, info = qt.quantize_transform_pass(model, by_type(conv2d=cfg, relu={"name": "integer", "data_in_width": 8,
                                                                          "data_in_frac_width": 4}))
    convs = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Conv2d)]
    assert set(convs) <= set(info.changed())
    seen, hooks = capture(q, torch.nn.Conv2d)
    q(x)
    for h in hooks:
        h.remove()
    assert len(seen) == len(convs)
    for name, mod, xin, out in seen:
        b = None if mod.bias is None else mase_integer(mod.bias, 8, 6)
        want = F.conv2d(mase_integer(xin, 8, 4), mase_integer(mod.weight, 8, 6), b, mod.stride, mod.padding,
                        mod.dilation, mod.groups)
        assert_same_bits(out.detach(), want.detach(), name)


def test_embedding_weights():
    model = tiny_bert()
    q, info = qt.quantize_transform_pass(model, by_type(embedding={"name": "integer", "mode": "mase",
                                                                   "weight_width": 8, "weight_frac_width": 6}))
    emb = q.bert.embeddings.word_embeddings
    assert "bert.embeddings.word_embeddings" in info.changed()
    ids = tokens()
    assert_same_bits(emb(ids).detach(), F.embedding(ids, mase_integer(model.bert.embeddings.word_embeddings.weight,
                                                                      8, 6)).detach(), "embedding")


def test_by_name_and_by_regex():
    model = tiny_bert()
    q, info = qt.quantize_transform_pass(model, {"by": "name", "bert.encoder.layer.0.attention.self.query":
                                                 {"config": INT8},
                                                 "bert_encoder_layer_1_output_dense": {"config": INT8}})
    assert sorted(info.changed()) == ["bert.encoder.layer.0.attention.self.query", "bert.encoder.layer.1.output.dense"]
    q, info = qt.quantize_transform_pass(model, {"by": "regex", r"bert\.encoder\.layer\.\d+\.attention\.self\.(query|key)":
                                                 {"config": INT8}})
    assert len(info.changed()) == 4 and all(n.endswith(("query", "key")) for n in info.changed())
    with pytest.warns(UserWarning, match="matches no quantizable layer"):
        qt.quantize_transform_pass(model, {"by": "name", "no.such.layer": {"config": INT8}})


def test_multihead_attention_out_proj_is_left_with_a_note():
    mha = torch.nn.Sequential(torch.nn.Linear(8, 8))
    mha.append(torch.nn.MultiheadAttention(8, 2))
    _, info = qt.quantize_transform_pass(mha, by_type(linear=INT8))
    assert info.changed() == ["0"]
    assert any("out_proj" in n for n in info.notes)


# ---- training: straight-through gradients, compile -------------------------------------------

def test_qat_step_gradients_follow_mase_straight_through():
    model = tiny_bert()
    q, _ = qt.quantize_transform_pass(model, by_type(linear=INT8))
    lin = q.bert.encoder.layer[0].intermediate.dense
    x = torch.randn(3, 5, 32, requires_grad=True)
    y = lin(x)
    g = torch.randn_like(y)
    y.backward(g)
    # MASE: x_q = x + (q(x) - x).detach() for every operand (identity STE)
    ste = lambda t, which: t + (int8_ref(t, which) - t).detach()
    w = lin.weight.detach().clone().requires_grad_(True)
    b = lin.bias.detach().clone().requires_grad_(True)
    x2 = x.detach().clone().requires_grad_(True)
    F.linear(ste(x2, "data_in"), ste(w, "weight"), ste(b, "bias")).backward(g)
    assert_same_bits(x.grad, x2.grad, "grad input")
    assert_same_bits(lin.weight.grad, w.grad, "grad weight")
    assert_same_bits(lin.bias.grad, b.grad, "grad bias")


def test_compiled_model_equals_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    q, _ = qt.quantize_transform_pass(model, by_type(linear=INT8, gelu={"name": "mxint", "data_in_block_size": [16],
                                                                        "data_in_element_bits": 8}))
    x = torch.randn(8, 16, requires_grad=True)
    y = q(x)
    y.square().sum().backward()
    want = (y.detach(), x.grad.clone(), q[0].weight.grad.clone())
    x.grad = None
    q.zero_grad()
    # aot_eager: the custom op's fake kernel and registered backward, traced with no graph break
    yc = torch.compile(q, fullgraph=True, backend="aot_eager")(x)
    yc.square().sum().backward()
    for got, exp, what in zip((yc.detach(), x.grad, q[0].weight.grad), want, ("output", "grad x", "grad W")):
        assert_same_bits(got, exp, what)


def test_compiled_function_with_a_spec_it_has_not_seen():
    x = torch.randn(4, 64, requires_grad=True)
    spec = "block_fp:width=6,exponent_width=8,block_size=16"  # first parsed inside the compiled trace
    y = torch.compile(lambda t: qt.fake_quantize(t, spec), fullgraph=True, backend="aot_eager")(x)
    assert_same_bits(y.detach(), qt.fake_quantize(x, spec).detach(), spec)


def test_inductor_compiled_bert_equals_eager_forward():
    q, _ = qt.quantize_transform_pass(tiny_bert(), by_type(linear=INT8))
    ids = tokens()
    with torch.no_grad():
        eager = q(input_ids=ids).logits
        compiled = torch.compile(q, fullgraph=True)(input_ids=ids).logits
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-6)


# ---- dtypes and layouts -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_dtypes_quantize_in_float32_and_return_the_dtype(dtype):
    x = torch.randn(4, 33).to(dtype)
    y = qt.fake_quantize(x, "integer:width=8,frac_width=4")
    assert y.dtype == dtype
    want = qnum.Format("integer:width=8,frac_width=4").quantize(x.float()).to(dtype)
    assert torch.equal(y, want)


def test_non_contiguous_input():
    x = torch.randn(16, 64)[:, ::2]
    assert not x.is_contiguous()
    f = "mxint8"
    assert torch.equal(qt.fake_quantize(x, f), qt.fake_quantize(x.contiguous(), f))


@pytest.mark.parametrize("dtype", [torch.int32, torch.float64])
def test_other_dtypes_are_refused_naming_the_dtype(dtype):
    with pytest.raises(TypeError, match=str(dtype)):
        qt.fake_quantize(torch.ones(4, dtype=dtype), "integer:width=8,frac_width=4")


# ---- bad configs: clear errors, the model unchanged ------------------------------------------

def test_unknown_op_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown op 'linnear'.*known: .*linear"):
        qt.quantize_transform_pass(tiny_bert(), by_type(linnear=INT8))


def test_failed_pass_changes_nothing_even_inplace():
    model = tiny_bert()
    bad = {"by": "type", "linear": {"config": INT8}, "gelu": {"config": {"name": "integer", "data_in_widht": 8}}}
    with pytest.raises(ValueError, match="unknown key 'widht'"):
        qt.quantize_transform_pass(model, bad, inplace=True)
    assert not any(isinstance(m, qt.QuantMixin) for m in model.modules())


def test_shape_changing_format_is_refused():
    with pytest.raises(ValueError, match="changes the tensor's shape"):
        qt.quantize_transform_pass(torch.nn.Sequential(torch.nn.Linear(4, 4)),
                                   by_type(linear={"name": "residual_sign", "weight_levels": 2}))


# ---- prune ------------------------------------------------------------------------------------

def linear_weights(model):
    return {n: m.weight.detach() for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}


@pytest.mark.parametrize("method", ["l1-norm", "random"])
@pytest.mark.parametrize("scope", ["local", "global"])
def test_prune_counts_are_exact(method, scope):
    model = tiny_bert()
    p, info = qt.prune_transform_pass(model, {"weight": {"sparsity": 0.3, "method": method, "scope": scope},
                                              "seed": 4})
    ws = linear_weights(p)
    if scope == "local":
        for n, w in ws.items():
            assert int((w == 0).sum()) == round(0.3 * w.numel()), n
    else:
        total = sum(w.numel() for w in ws.values())
        assert sum(int((w == 0).sum()) for w in ws.values()) == round(0.3 * total)
    assert sum(r["pruned"] for r in info["rows"]) == sum(int((w == 0).sum()) for w in ws.values())
    assert all(int((w == 0).sum()) == 0 for w in linear_weights(model).values())  # input model untouched


def test_l1_selection_and_ties_equal_the_cpp_rule():
    lin = torch.nn.Sequential(torch.nn.Linear(6, 5))
    with torch.no_grad():  # many ties: |w| in {0.5, 1, 2}
        lin[0].weight.copy_(torch.tensor([0.5, -1.0, 2.0, -0.5, 1.0, -2.0] * 5).reshape(5, 6))
    p, _ = qt.prune_transform_pass(lin, {"weight": {"sparsity": 0.4, "method": "l1-norm"}})
    w = lin[0].weight.detach().numpy().ravel()
    k = round(0.4 * w.size)
    want = np.ones(w.size, np.float32)
    want[np.argsort(np.abs(w), kind="stable")[:k]] = 0  # smallest |w|, ties: lower flat index first
    assert np.array_equal(qt.weight_mask(p[0]).numpy().ravel(), want)


def test_pruned_weights_stay_zero_through_training():
    model = tiny_bert()
    p, _ = qt.prune_transform_pass(model, {"weight": {"sparsity": 0.5, "method": "l1-norm"}})
    zero = {n: w == 0 for n, w in linear_weights(p).items()}
    opt = torch.optim.AdamW(p.parameters(), lr=1e-2)
    for _ in range(2):
        loss = p(input_ids=tokens(), labels=torch.tensor([0, 1])).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    for n, w in linear_weights(p).items():
        assert bool((w[zero[n]] == 0).all()), n


def test_passes_compose_on_a_pruned_trained_model():
    """prune -> train -> quantize -> prune again -> LoRA: each pass deep-copies its input."""
    model = tiny_bert()
    p, _ = qt.prune_transform_pass(model, {"weight": {"sparsity": 0.3, "method": "l1-norm"}})
    p.train()
    p(input_ids=tokens(), labels=torch.tensor([0, 1])).loss.backward()
    q, info = qt.quantize_transform_pass(p, by_type(linear=INT8))
    assert len(info.changed()) == 14
    q2, _ = qt.prune_transform_pass(q, {"weight": {"sparsity": 0.5, "method": "l1-norm"}})
    for n, w in linear_weights(q2).items():
        assert int((w == 0).sum()) >= round(0.5 * w.numel()) - 1, n
    lm, _ = qt.insert_lora_adapter_transform_pass(q2, rank=2)
    assert torch.isfinite(lm(input_ids=tokens()).logits).all()
    s = qt.summarize(q2)
    linear = sum(m.weight.numel() + m.bias.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert s["bits"] == 32.0 * s["parameters"] - 24.0 * linear  # the pruned weights counted at 8 bits


def test_activation_pruning_per_sample_counts():
    lin = torch.nn.Sequential(torch.nn.Linear(10, 3))
    p, _ = qt.prune_transform_pass(lin, {"activation": {"sparsity": 0.3, "method": "l1-norm"}})
    seen = []
    p[0].register_forward_pre_hook(lambda m, a: seen.append(a[0].clone()), prepend=False)
    x = torch.randn(4, 10)
    p(x)
    assert all(int((row == 0).sum()) == 3 for row in seen[0])


def test_gpt2_conv1d_prunes():
    p, info = qt.prune_transform_pass(tiny_gpt2(), {"weight": {"sparsity": 0.5, "method": "l1-norm"}})
    conv = p.transformer.h[0].attn.c_attn
    assert int((conv.weight == 0).sum()) == conv.weight.numel() // 2
    assert torch.isfinite(p(input_ids=tokens()).logits).all()


# ---- LoRA, summarize ---------------------------------------------------------------------------

def test_lora_insert_train_fuse():
    model = tiny_bert()
    lm, info = qt.insert_lora_adapter_transform_pass(model, rank=4, alpha=8, target=r".*attention\.self\.(query|value)",
                                                     trainable=[r"classifier"])
    assert len(info["adapted"]) == 4
    adapters = sum(m.lora_A.weight.numel() + m.lora_B.weight.numel() for m in lm.modules()
                   if isinstance(m, qt.LoRALinear))
    head = sum(p.numel() for p in lm.classifier.parameters())
    assert info["trainable"] == adapters + head
    ids = tokens()
    assert torch.equal(lm(input_ids=ids).logits, model(input_ids=ids).logits)  # B = 0
    lm.train()
    opt = torch.optim.SGD([p for p in lm.parameters() if p.requires_grad], lr=0.5)
    loss = lm(input_ids=ids, labels=torch.tensor([0, 1])).loss
    loss.backward()
    opt.step()
    lm.eval()
    fused, n = qt.fuse_lora_weights_transform_pass(lm)
    assert n == 4 and not any(isinstance(m, qt.LoRALinear) for m in fused.modules())
    torch.testing.assert_close(fused(input_ids=ids).logits, lm(input_ids=ids).logits, rtol=1e-5, atol=1e-6)
    assert set(fused.state_dict()) == set(model.state_dict())


def test_lora_bad_target_and_rank():
    with pytest.raises(ValueError, match="matches no Linear"):
        qt.insert_lora_adapter_transform_pass(tiny_bert(), rank=2, target="nothing")
    with pytest.raises(ValueError, match="rank 64 is larger"):
        qt.insert_lora_adapter_transform_pass(tiny_bert(), rank=64)


def test_summarize_bits_and_costs():
    model = tiny_bert()
    s0 = qt.summarize(model)
    assert s0["bits_per_parameter"] == 32.0 and s0["trainable"] == s0["parameters"]
    q, _ = qt.quantize_transform_pass(model, by_type(linear=INT8))
    ids = tokens()
    s = qt.summarize(q, input_ids=ids)
    linear_w = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    linear_b = sum(m.bias.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    want_bits = 32.0 * s0["parameters"] - 24.0 * (linear_w + linear_b)
    assert s["bits"] == want_bits
    dense = [r for r in s["layers"] if r["node"] == "bert.encoder.layer.0.intermediate.dense"][0]
    macs = 32 * 64 * ids.numel()
    assert dense["macs"] == macs and dense["flops_forward"] == 2 * macs + 64 * ids.numel()
    assert dense["bitops_forward"] == macs * 8 * 8
    assert "total" in s["table"]


# ---- the operator: C++ (libqnum_torch_ops.so) and its Python fallback agree --------------------

def operator_outputs(compile_check=False):
    """Outputs, gradients and bf16 results of the operator on three formats (seeded)."""
    torch.manual_seed(0)
    x = torch.randn(4, 64, requires_grad=True)
    outs = []
    for spec in ("integer:width=8,frac_width=4,ste=clipped", "mxint8", "nvfp4"):
        y = qt.fake_quantize(x, spec)
        (g,) = torch.autograd.grad(y.square().sum(), x)
        if compile_check:
            yc = torch.compile(lambda t: qt.fake_quantize(t, spec), fullgraph=True, backend="aot_eager")(x)
            assert torch.equal(y, yc)
        outs += [y.detach(), g, qt.fake_quantize(x.detach().bfloat16(), spec).float()]
    return outs


_FALLBACK_SCRIPT = r"""
import sys, torch
sys.path.insert(0, sys.argv[2])
from qnum.torch import _ops
from test_torch_passes import operator_outputs
assert not _ops.CPP_OP, "QNUM_TORCH_OPS=python must select the Python operator"
torch.save(operator_outputs(compile_check=True), sys.argv[1])
"""


def test_python_fallback_operator_equals_the_cpp_one(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path
    from qnum.torch import _ops
    if not _ops.CPP_OP:
        pytest.skip("qnum was built without torch: only the Python operator is present")
    out = tmp_path / "fallback.pt"
    env = dict(os.environ, QNUM_TORCH_OPS="python")
    subprocess.run([sys.executable, "-c", _FALLBACK_SCRIPT, str(out), str(Path(__file__).parent)], check=True,
                   env=env, cwd=tmp_path)
    for i, (a, b) in enumerate(zip(operator_outputs(), torch.load(out))):
        assert_same_bits(a, b, f"tensor {i}")
