"""The numpy BERT encoder's forward pass as an ONNX graph, for onnxruntime.

The graph is built from the already loaded :class:`BertEncoder` weights with the ``onnx``
helper API, in memory, so nothing is downloaded and no exporter (torch) is needed. It computes
exactly what :meth:`BertEncoder.forward` computes (same pre-scaled packed QKV weights, same
additive padding mask, exact-erf GELU), in standard opset-17 operators that onnxruntime's graph
optimiser fuses (LayerNorm, GELU, MatMul + Add). ``quantize_int8`` turns it into the dynamic
int8 variant (weights int8, activations quantised per batch) with onnxruntime's quantiser.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from ._bert import BertEncoder
from .base import EmbeddingError

OPSET = 17


def build_bert_graph(encoder: BertEncoder):  # -> onnx.ModelProto
    """An ONNX model with inputs ``input_ids``, ``token_type_ids``, ``attention_mask`` (int64, (B, L))
    and output ``last_hidden_state`` (float32, (B, L, hidden))."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    cfg = encoder.config
    hidden, heads = cfg.hidden_size, cfg.num_attention_heads
    head_dim = hidden // heads
    eps = float(cfg.layer_norm_eps)
    nodes: list = []
    inits: list = []

    def const(name: str, value: np.ndarray) -> str:
        # (np.ascontiguousarray would turn a 0-d scalar into shape (1,).)
        inits.append(numpy_helper.from_array(value if value.flags.c_contiguous else value.copy(order="C"), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def layer_norm(x: str, w: np.ndarray, b: np.ndarray, name: str) -> str:
        return node("LayerNormalization", [x, const(f"{name}.w", w), const(f"{name}.b", b)], name, axis=-1, epsilon=eps)

    def linear(x: str, w: np.ndarray, b: np.ndarray, name: str) -> str:
        mm = node("MatMul", [x, const(f"{name}.w", w)], f"{name}.mm")
        return node("Add", [mm, const(f"{name}.b", b)], name)

    # Embeddings: word + token type + position (0..L-1).
    word = node("Gather", [const("word_emb", encoder.word_emb), "input_ids"], "emb.word", axis=0)
    types = node("Gather", [const("type_emb", encoder.type_emb), "token_type_ids"], "emb.type", axis=0)
    shape = node("Shape", ["input_ids"], "emb.shape")
    length = node("Gather", [shape, const("one_i64", np.array(1, dtype=np.int64))], "emb.len", axis=0)
    positions = node("Range", [const("zero_i64", np.array(0, dtype=np.int64)), length,
                               const("step_i64", np.array(1, dtype=np.int64))], "emb.positions")
    pos = node("Gather", [const("pos_emb", encoder.pos_emb), positions], "emb.pos", axis=0)
    x = node("Add", [node("Add", [word, types], "emb.wt"), pos], "emb.sum")
    x = layer_norm(x, encoder.emb_ln_w, encoder.emb_ln_b, "emb.ln")

    # Additive mask (B, 1, 1, L): the float32 minimum on padded keys, as BertEncoder.forward.
    mask_f = node("Cast", ["attention_mask"], "mask.f", to=TensorProto.FLOAT)
    inverted = node("Sub", [const("one_f", np.array(1.0, dtype=np.float32)), mask_f], "mask.inv")
    bias = node("Mul", [inverted, const("fmin", np.array(np.finfo(np.float32).min, dtype=np.float32))], "mask.bias")
    mask_bias = node("Unsqueeze", [bias, const("mask_axes", np.array([1, 2], dtype=np.int64))], "mask.bias4")

    qkv_shape = const("qkv_shape", np.array([0, 0, 3, heads, head_dim], dtype=np.int64))
    ctx_shape = const("ctx_shape", np.array([0, 0, hidden], dtype=np.int64))
    inv_sqrt2 = const("inv_sqrt2", np.array(1.0 / np.sqrt(2.0), dtype=np.float32))
    half = const("half", np.array(0.5, dtype=np.float32))
    one = const("one_f2", np.array(1.0, dtype=np.float32))
    for i, layer in enumerate(encoder.layers):
        p = f"l{i}"
        qkv = linear(x, layer.qkv_w, layer.qkv_b, f"{p}.qkv")
        qkv = node("Reshape", [qkv, qkv_shape], f"{p}.qkv.r")
        qkv = node("Transpose", [qkv], f"{p}.qkv.t", perm=[2, 0, 3, 1, 4])  # (3, B, heads, L, head_dim)
        q, k, v = (node("Gather", [qkv, const(f"{p}.idx{j}", np.array(j, dtype=np.int64))], f"{p}.{n}", axis=0)
                   for j, n in enumerate("qkv"))
        kt = node("Transpose", [k], f"{p}.kt", perm=[0, 1, 3, 2])
        scores = node("Add", [node("MatMul", [q, kt], f"{p}.scores"), mask_bias], f"{p}.scores.m")
        probs = node("Softmax", [scores], f"{p}.probs", axis=-1)
        context = node("MatMul", [probs, v], f"{p}.ctx")
        context = node("Transpose", [context], f"{p}.ctx.t", perm=[0, 2, 1, 3])
        context = node("Reshape", [context, ctx_shape], f"{p}.ctx.r")
        attn = linear(context, layer.attn_out_w, layer.attn_out_b, f"{p}.attn_out")
        x = layer_norm(node("Add", [attn, x], f"{p}.attn.res"), layer.attn_ln_w, layer.attn_ln_b, f"{p}.attn.ln")
        h = linear(x, layer.ffn_in_w, layer.ffn_in_b, f"{p}.ffn_in")
        erf = node("Erf", [node("Mul", [h, inv_sqrt2], f"{p}.gelu.s")], f"{p}.gelu.erf")
        gate = node("Mul", [node("Add", [erf, one], f"{p}.gelu.a"), half], f"{p}.gelu.g")
        h = node("Mul", [h, gate], f"{p}.gelu")
        out = linear(h, layer.ffn_out_w, layer.ffn_out_b, f"{p}.ffn_out")
        x = layer_norm(node("Add", [out, x], f"{p}.ffn.res"), layer.ffn_ln_w, layer.ffn_ln_b, f"{p}.ffn.ln")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="last_hidden_state"))

    int_input = lambda name: helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "length"])  # noqa: E731
    graph = helper.make_graph(
        nodes, "bert", [int_input("input_ids"), int_input("token_type_ids"), int_input("attention_mask")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "length", hidden])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="engram")
    model.ir_version = min(model.ir_version, 9)  # readable by older onnxruntime builds too
    onnx.checker.check_model(model, full_check=False)
    return model


def quantize_int8(model) -> bytes:  # model: onnx.ModelProto
    """The dynamic int8 quantisation of ``model`` (MatMul weights int8, per-channel), serialised."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="engram-onnx-") as tmp:
        src, dst = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        src.write_bytes(model.SerializeToString())
        try:
            quantize_dynamic(src, dst, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"])
        except Exception as exc:  # the quantiser raises assorted errors on graphs it cannot handle
            raise EmbeddingError(f"int8 quantisation failed: {exc}") from exc
        return dst.read_bytes()


def make_session(model_bytes: bytes, *, threads: int = 0):  # -> onnxruntime.InferenceSession
    """A CPU inference session with every graph optimisation on. ``threads`` 0 lets onnxruntime choose."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads or min(os.cpu_count() or 1, 4)
    options.inter_op_num_threads = 1
    # Idle worker threads sleep instead of spinning: Elasticsearch and the other request threads
    # share these cores, and a spinning pool burns CPU they need.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(model_bytes, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
        raise EmbeddingError(f"onnxruntime could not load the MiniLM graph: {exc}") from exc
