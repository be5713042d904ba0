#!/usr/bin/env python3
"""PyTorch / ONNX Runtime baseline for BERT sequence-classifier inference on the CPU.

What it measures: the wall time of one forward pass (logits only, no loss, no tokenizer) of
transformers' BertForSequenceClassification with random weights (torch.manual_seed(0), nothing
downloaded) on a batch of random token ids [batch, seq] with an all-ones attention mask (no
padding), for each engine below, in one process one after the other. Each engine runs --warmup
untimed forwards, then --steps timed ones; the median (ms_per_batch) and the fastest (ms_min)
are reported, with tokens/s = batch * seq / median. Timing is perf_counter around the call only
(inputs are built once; for ONNX Runtime the numpy inputs are fed as they are).

Model shapes take qnum's BERT names (bert_shape of bench/torch_bert_baseline.py):
bert-tiny = 2 layers, hidden 128, 2 heads, intermediate 512; bert-mini / -small / -medium;
bert-base = 12-768-12-3072; bert:L-H-A[-I]. Vocabulary 30522, 512 positions, 2 labels,
transformers' "sdpa" attention (torch's scaled_dot_product_attention).

    python3 bench/infer_baseline.py --model bert-tiny --batch 32 --seq 128 --threads 1
    python3 bench/infer_baseline.py --model bert-base --batch 1 --steps 2 --json
    python3 bench/infer_baseline.py --engines torch-fp32,ort-fp32 --threads 4

--threads sets torch.set_num_threads and ONNX Runtime's intra_op_num_threads (inter-op: 1 for
both). --json prints one JSON object per engine per line on stdout ({"engine", "model", "batch",
"seq", "threads", "ms_per_batch", "ms_min", "tokens_per_s", "torch", "onnxruntime"}) and sends
every note (skipped engines, logits differences, exporter) to stderr; without it a table.

Engines (--engines, a comma list; by default every one that this installation can run):
  torch-fp32            the model as built, eval(), under torch.inference_mode().
  torch-dynamic-x86     torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=qint8)
  torch-dynamic-onednn  with torch.backends.quantized.engine = 'x86' (FBGEMM kernels) or
                        'onednn' (oneDNN kernels), set while quantizing and while running; an
                        engine missing from torch.backends.quantized.supported_engines is skipped.
  ort-fp32              the fp32 model exported with torch.onnx.export (fixed shapes) into a
                        temporary folder, run by onnxruntime.InferenceSession on the
                        CPUExecutionProvider, graph optimizations ORT_ENABLE_ALL, sequential
                        execution.
  ort-dynamic-int8      that ONNX file pre-processed with
                        onnxruntime.quantization.shape_inference.quant_pre_process (ONNX Runtime
                        recommends it; skipped with a note if it fails), then
                        onnxruntime.quantization.quantize_dynamic(..., weight_type=QInt8), run
                        in the same kind of session.
Without onnxruntime / onnx the ort engines are skipped (pip install onnxruntime onnx onnxscript).

What "dynamic int8" means here (weights quantized once, ahead of time; activations quantized
at run time from each tensor's own min/max, one scale and zero point per tensor per call):
  torch-dynamic-*: every nn.Linear (Q/K/V, attention output, intermediate, output of each layer,
    the pooler and the classifier) becomes a DynamicQuantizedLinear. Weights: qint8, per-tensor
    symmetric (default_dynamic_qconfig's MinMaxObserver, torch.per_tensor_symmetric), bias fp32.
    Activations: quint8, per-tensor asymmetric, scale/zero point from the input's min/max at each
    call; the module calls quantized::linear_dynamic with reduce_range=True, which both kernels
    (FBGEMM for 'x86', oneDNN for 'onednn') pass to ChooseQuantizationParams, so activations
    use 7 bits (0..127). int32 accumulation, output dequantized to fp32. Everything else
    (embeddings, attention softmax and its two batched matmuls, LayerNorm, GELU) stays fp32.
  ort-dynamic-int8: quantize_dynamic's defaults (per_channel=False, reduce_range=False). Every
    MatMul with a constant weight (its Gemms, the pooler and classifier, are first rewritten as
    MatMul + Add) gets int8 per-tensor symmetric weights and a DynamicQuantizeLinear on its input:
    uint8 0..255, per-tensor asymmetric, scale/zero point from the input's min/max at each call;
    MatMulInteger in int32, then scaled back to fp32 (ORT's optimizer fuses this into
    DynamicQuantizeMatMul / MatMulIntegerToFloat). The default op list also quantizes Gather on a
    constant table, so the embedding tables still looked up after pre-processing are stored int8
    per-tensor and dequantized after the lookup: with these fixed shapes pre-processing folds the
    position and token-type lookups into constants, leaving the word embeddings (without it all
    three tables). That is a difference from torch-dynamic-*, whose embeddings stay fp32. The
    activation x activation matmuls of attention stay fp32.
Each engine's logits are compared with torch-fp32's on the same inputs (max |difference|
printed); ort-fp32 must agree within FP32_TOL or the script exits non-zero after the report,
the int8 engines are only printed.
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import warnings

import torch
from torch import nn
from transformers import BertConfig, BertForSequenceClassification

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_bert_baseline import bert_shape  # noqa: E402

ENGINES = ["torch-fp32", "torch-dynamic-x86", "torch-dynamic-onednn", "ort-fp32", "ort-dynamic-int8"]
FP32_TOL = 1e-3  # max |logit difference| tolerated between ort-fp32 and torch-fp32
ORT_HINT = "pip install onnxruntime onnx onnxscript"
ORT_MAX_BYTES = 2 ** 31 - 2 ** 26  # one protobuf file (no external data here) holds under 2 GiB


def time_calls(fn, warmup, steps):
    """Run fn warmup + steps times; return the timed seconds and the last result."""
    times, out = [], None
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        out = fn()
        t = time.perf_counter() - t0
        if i >= warmup:
            times.append(t)
    return times, out


@contextlib.contextmanager
def quantized_engine(name):
    prev = torch.backends.quantized.engine
    torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = prev


def export_onnx(model, ids, mask, path, note):
    """torch.onnx.export with fixed shapes. torch >= 2.9 defaults to the torch.export-based
    ("dynamo") exporter, which needs onnxscript; it is the maintained path (the TorchScript
    exporter is deprecated) and on torch 2.15 it exports transformers' sdpa BERT cleanly, so it is
    tried first. Its constant folding may log "Evaluation failed: cannot reshape array ..." on the
    mask arithmetic; harmless, the logits check below catches a broken graph. When onnxscript is
    missing or the dynamo export fails, the TorchScript exporter (dynamo=False, opset 17) is used:
    on the same model it gives the same logits."""
    common = dict(kwargs={"input_ids": ids, "attention_mask": mask}, input_names=["input_ids", "attention_mask"],
                  output_names=["logits"])
    try:
        with contextlib.redirect_stdout(sys.stderr):  # its progress lines must not mix with --json
            torch.onnx.export(model, (), path, dynamo=True, external_data=False, verbose=False, **common)
        return "dynamo"
    except Exception as e:  # ImportError without onnxscript, or an export failure
        note(f"ort: dynamo ONNX exporter failed ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
             "using the TorchScript exporter")
        if os.path.exists(path):
            os.remove(path)
        with contextlib.redirect_stdout(sys.stderr):
            torch.onnx.export(model, (), path, dynamo=False, opset_version=17, **common)
        return "torchscript"


def ort_session(ort, path, threads):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def op_counts(onnx, path, ops):
    counts = {}
    for n in onnx.load(path).graph.node:
        if n.op_type in ops:
            counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return ", ".join(f"{counts.get(o, 0)} {o}" for o in ops)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="bert-tiny",
                    help="bert-tiny, bert-mini, bert-small, bert-medium, bert-base or bert:L-H-A-I "
                         "(layers-hidden-heads-intermediate), as qnum's model names")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch.set_num_threads and ONNX Runtime intra_op_num_threads (inter-op 1)")
    ap.add_argument("--steps", type=int, default=5, help="timed forwards per engine")
    ap.add_argument("--warmup", type=int, default=1, help="untimed forwards per engine first")
    ap.add_argument("--engines", default=None,
                    help="comma list of " + ", ".join(ENGINES) + " (default: every one available)")
    ap.add_argument("--json", action="store_true", help="one JSON object per engine per line")
    a = ap.parse_args()
    if a.batch < 1 or a.seq < 1 or a.threads < 1 or a.steps < 1 or a.warmup < 0:
        raise SystemExit("--batch, --seq, --threads, --steps must be >= 1 and --warmup >= 0")
    if a.seq > 512:
        raise SystemExit("--seq: at most 512 (max_position_embeddings)")
    explicit = a.engines is not None
    engines = [e.strip() for e in a.engines.split(",") if e.strip()] if explicit else list(ENGINES)
    bad = [e for e in engines if e not in ENGINES]
    if bad or not engines:
        raise SystemExit(f"--engines: unknown {', '.join(bad) or '(empty)'}; expected a comma list of "
                         + ", ".join(ENGINES))

    out = sys.stderr if a.json else sys.stdout

    def note(msg):
        print(msg, file=out, flush=True)

    # torch.ao.quantization's eager dynamic quantization is deprecated in favour of torchao (and
    # warns so on every call) but is still the stock, shipped PyTorch path timed here.
    warnings.filterwarnings("ignore", message="torch.ao.quantization is deprecated")
    warnings.filterwarnings("ignore", message="torch.quantize_per_tensor, torch.quantize_per_channel")
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    layers, hidden, heads, inter = bert_shape(a.model)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=inter, max_position_embeddings=512, num_labels=2,
                     attn_implementation="sdpa")
    model = BertForSequenceClassification(cfg).eval()
    ids = torch.randint(1000, 30000, (a.batch, a.seq))  # seeded: the ids of bench/torch_bert_baseline.py
    mask = torch.ones_like(ids)

    # Which engines can run here.
    for e in ("torch-dynamic-x86", "torch-dynamic-onednn"):
        qe = e.rsplit("-", 1)[1]
        if e in engines and qe not in torch.backends.quantized.supported_engines:
            note(f"{e}: skipped, torch.backends.quantized.supported_engines = "
                 f"{torch.backends.quantized.supported_engines} lacks '{qe}'")
            engines.remove(e)
    ort = onnx = None
    want_ort = [e for e in engines if e.startswith("ort-")]
    if want_ort:
        try:
            import onnx
            import onnxruntime as ort
        except ImportError as e:
            note(f"{', '.join(want_ort)}: skipped, {e.name} is not installed ({ORT_HINT})")
            engines = [e for e in engines if not e.startswith("ort-")]
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    if ort is not None and param_bytes > ORT_MAX_BYTES:
        note(f"{', '.join(want_ort)}: skipped, {param_bytes / 2**30:.2f} GiB of fp32 weights is over one "
             "ONNX protobuf file's 2 GiB (this script does not use external data)")
        engines = [e for e in engines if not e.startswith("ort-")]

    results, failed = [], []

    def record(engine, times, logits, ref):
        diff = None if ref is None else (logits - ref).abs().max().item()
        med = statistics.median(times)
        results.append({"engine": engine, "model": a.model, "batch": a.batch, "seq": a.seq, "threads": a.threads,
                        "ms_per_batch": 1e3 * med, "ms_min": 1e3 * min(times),
                        "tokens_per_s": a.batch * a.seq / med, "torch": torch.__version__,
                        "onnxruntime": ort.__version__ if ort is not None else None,
                        "_diff": diff})
        return diff

    def check(engine, diff, exact):
        ok = diff <= FP32_TOL
        note(f"{engine}: max |logits - torch-fp32 logits| = {diff:.3g} (max |logit| {ref_scale:.3g})"
             + ("" if not exact else (f", within {FP32_TOL:g}" if ok else f", OVER {FP32_TOL:g}: export broken?")))
        if exact and not ok:
            failed.append(engine)

    # torch-fp32 (its logits are the reference for every other engine, so they are computed
    # even when the engine is not timed).
    with torch.inference_mode():
        if "torch-fp32" in engines:
            times, ref = time_calls(lambda: model(input_ids=ids, attention_mask=mask).logits, a.warmup, a.steps)
            record("torch-fp32", times, ref, None)
        else:
            ref = model(input_ids=ids, attention_mask=mask).logits
    ref = ref.clone()
    ref_scale = ref.abs().max().item()

    for e in ("torch-dynamic-x86", "torch-dynamic-onednn"):
        if e not in engines:
            continue
        with quantized_engine(e.rsplit("-", 1)[1]):
            qmodel = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)  # a copy
            n = sum(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in qmodel.modules())
            with torch.inference_mode():
                times, logits = time_calls(lambda: qmodel(input_ids=ids, attention_mask=mask).logits,
                                           a.warmup, a.steps)
        note(f"{e}: {n} nn.Linear -> DynamicQuantizedLinear (engine '{e.rsplit('-', 1)[1]}')")
        check(e, record(e, times, logits, ref), exact=False)
        del qmodel

    if any(e.startswith("ort-") for e in engines):
        feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
        with tempfile.TemporaryDirectory(prefix="qnum-infer-") as tmp:
            fp32_path = os.path.join(tmp, "model.onnx")
            t0 = time.perf_counter()
            exporter = export_onnx(model, ids, mask, fp32_path, note)
            note(f"ort: exported with the {exporter} exporter in {time.perf_counter() - t0:.1f} s "
                 f"(torch {torch.__version__}, onnx {onnx.__version__}, onnxruntime {ort.__version__})")
            paths = {"ort-fp32": fp32_path}
            if "ort-dynamic-int8" in engines:
                from onnxruntime.quantization import QuantType, quantize_dynamic
                src = os.path.join(tmp, "model.pre.onnx")
                try:
                    from onnxruntime.quantization.shape_inference import quant_pre_process
                    quant_pre_process(fp32_path, src)
                    pre = "quant_pre_process ok"
                except Exception as ex:
                    note(f"ort-dynamic-int8: quant_pre_process failed ({type(ex).__name__}: {ex}); "
                         "quantizing the exported model as it is")
                    src, pre = fp32_path, "no pre-processing"
                int8_path = os.path.join(tmp, "model.int8.onnx")
                quantize_dynamic(src, int8_path, weight_type=QuantType.QInt8)
                paths["ort-dynamic-int8"] = int8_path
                note(f"ort-dynamic-int8: {pre}; "
                     + op_counts(onnx, int8_path, ["MatMulInteger", "DynamicQuantizeLinear", "DequantizeLinear",
                                                   "MatMul"])
                     + " (DequantizeLinear: int8 embedding tables; MatMul: fp32 attention matmuls)")
            for e in ("ort-fp32", "ort-dynamic-int8"):
                if e not in engines:
                    continue
                sess = ort_session(ort, paths[e], a.threads)
                names = [i.name for i in sess.get_inputs()]
                f = {k: feed[k] for k in names}
                times, logits = time_calls(lambda: sess.run(["logits"], f)[0], a.warmup, a.steps)
                check(e, record(e, times, torch.from_numpy(logits), ref), exact=(e == "ort-fp32"))
                del sess

    if a.json:
        for r in results:
            print(json.dumps({k: v for k, v in r.items() if not k.startswith("_")}), flush=True)
    else:
        print(f"\n{a.model} ({layers}-{hidden}-{heads}-{inter}), batch {a.batch} x seq {a.seq}, "
              f"{a.threads} thread(s), median of {a.steps} after {a.warmup} warm-up; torch {torch.__version__}, "
              f"onnxruntime {ort.__version__ if ort is not None else '-'}")
        print(f"{'engine':<22}{'ms/batch':>12}{'ms min':>12}{'tokens/s':>12}{'max|dlogit|':>14}")
        for r in results:
            d = "ref" if r["_diff"] is None else f"{r['_diff']:.2e}"
            print(f"{r['engine']:<22}{r['ms_per_batch']:>12.2f}{r['ms_min']:>12.2f}{r['tokens_per_s']:>12.0f}{d:>14}")
    if failed:
        raise SystemExit(f"logits of {', '.join(failed)} differ from torch-fp32 by more than {FP32_TOL:g}")


if __name__ == "__main__":
    main()
