"""The numpy BERT encoder's forward pass as an ONNX graph, for onnxruntime.

The graph is built from the already loaded :class:`BertEncoder` weights with the ``onnx``
helper API, in memory, so nothing is downloaded and no exporter (torch) is needed. It computes
exactly what :meth:`BertEncoder.forward` computes (same pre-scaled packed QKV weights, same
additive padding mask, exact-erf GELU), in standard opset-17 operators that onnxruntime's graph
optimiser fuses (LayerNorm, GELU, MatMul + Add). ``int8=True`` builds the integer variant
(weights int8 per output channel, activations uint8 per token; see ``build_bert_graph``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from ._bert import BertEncoder
from .base import EmbeddingError

if TYPE_CHECKING:
    import onnx
    import onnxruntime

OPSET = 17
# Fixed uint8 zero points of the int8 graph's activations where every row sits alike around one:
# the attention's weighted values are centred on 0, and GELU's output never goes below -0.17. The
# LayerNorm outputs that feed QKV and the first feed-forward layer spread widely, so those rows
# keep a zero point of their own (docs/performance.md, "Embeddings": the measured zero points).
CONTEXT_ZERO_POINT = 128
GELU_ZERO_POINT = 16


def exact_signed_int8(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU multiplies uint8 by int8 exactly in onnxruntime: x86 with VNNI
    (``vpdpbusd``, AVX512-VNNI or AVX-VNNI). Without it (AVX2, AVX512 before VNNI) onnxruntime's
    uint8 × int8 kernel uses ``vpmaddubsw``, which saturates each pair of products at 16 bits and
    moves the vectors (docs/performance.md, "Embeddings", gives what it cost). The uint8 × uint8
    kernel has no such step, so elsewhere the weights go as uint8 (the same integers, shifted by a
    zero point of 128): the same vectors on every CPU, at some CPU cost."""
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as lines:
            flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx512_vnni" in flags or "avx_vnni" in flags


def build_bert_graph(encoder: BertEncoder, *, int8: bool = False, signed_weights: bool | None = None) -> onnx.ModelProto:
    """An ONNX model with inputs ``word_embeddings`` (float32, (B, L, hidden)), ``token_type_ids`` and
    ``attention_mask`` (int64, (B, L)) and output ``last_hidden_state`` (float32, (B, L, hidden)).

    The rows of the word embedding table come in as an input, looked up by the caller (in a table
    mapped from the weights file: ``word_embeddings_mapped``), and the graph holds no table: the
    session would otherwise keep the table, the model's largest tensor, twice.

    With ``int8`` every weight MatMul (QKV, attention output, both feed-forward layers) runs in
    integers: weights int8 per output channel, activations uint8 per token, each token's scale
    taken from its own row (its zero point too, where rows differ in where 0 falls; see
    CONTEXT_ZERO_POINT). So a text's vector does not depend on what else is in its batch
    (onnxruntime's dynamic quantiser takes one scale for the whole batch tensor, padding
    included, which moved a text's vector by up to cosine 0.014 with its batch-mates). Each
    quantisation is one QuantizeLinear and each row scale one DequantizeLinear, per-axis.
    ``signed_weights`` (default: ``exact_signed_int8()``) gives MatMulInteger the weights as
    int8; otherwise as uint8 with a zero point of 128. Both compute the same integers where the
    CPU's kernel is exact, so the choice changes speed, never a vector."""
    if signed_weights is None:
        signed_weights = exact_signed_int8()
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    cfg = encoder.config
    hidden, heads = cfg.hidden_size, cfg.num_attention_heads
    head_dim = hidden // heads
    eps = float(cfg.layer_norm_eps)
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        # (np.ascontiguousarray would turn a 0-d scalar into shape (1,).)
        inits.append(numpy_helper.from_array(value if value.flags.c_contiguous else value.copy(order="C"), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def layer_norm(x: str, w: np.ndarray, b: np.ndarray, name: str) -> str:
        return node("LayerNormalization", [x, const(f"{name}.w", w), const(f"{name}.b", b)], name, axis=-1, epsilon=eps)

    def linear(x: str, w: np.ndarray, b: np.ndarray, name: str, zero_point: int | None = None) -> str:
        if int8:
            return linear_int8(x, w, b, name, zero_point)
        mm = node("MatMul", [x, const(f"{name}.w", w)], f"{name}.mm")
        return node("Add", [mm, const(f"{name}.b", b)], name)

    zero_f = const("q.zero", np.array(0.0, dtype=np.float32))
    u8_max = const("q.u8max", np.array(255.0, dtype=np.float32))
    tiny = const("q.tiny", np.array(1e-12, dtype=np.float32))
    axis1 = const("q.axis1", np.array([1], dtype=np.int64))
    one_11 = const("q.one11", np.ones((1, 1), dtype=np.float32))
    weight_zero = None if signed_weights else const("q.wzero", np.array(128, dtype=np.uint8))
    first, last = const("q.first", np.array([0], dtype=np.int64)), const("q.last", np.array([-1], dtype=np.int64))

    def quantise_rows(x2: str, name: str, zero_point: int | None) -> tuple[str, str, str | None, str | None]:
        """uint8 rows of the 2-D float ``x2``, each with its own scale: (q, scale (N,), the float
        zero points (N,) when each row has its own, the uint8 scalar zero point when fixed)."""
        hi = node("ReduceMax", [x2], f"{name}.max", axes=[-1], keepdims=0)
        lo = node("ReduceMin", [x2], f"{name}.min", axes=[-1], keepdims=0)
        if zero_point is None:  # the row's own range, widened to hold 0 (as DynamicQuantizeLinear)
            lo, hi = node("Min", [lo, zero_f], f"{name}.lo"), node("Max", [hi, zero_f], f"{name}.hi")
            scale = node("Max", [node("Div", [node("Sub", [hi, lo], f"{name}.range"), u8_max], f"{name}.s0"), tiny],
                         f"{name}.scale")
            zero = node("Round", [node("Div", [node("Neg", [lo], f"{name}.nlo"), scale], f"{name}.z0")], f"{name}.zp")
            zero_u8 = node("Cast", [zero], f"{name}.zpu", to=TensorProto.UINT8)
            return node("QuantizeLinear", [x2, scale, zero_u8], f"{name}.q", axis=0), scale, zero, None
        # A fixed zero point z: the scale is the smallest that fits the row on both sides of it.
        fixed = const(f"{name}.z", np.array(zero_point, dtype=np.uint8))
        scale = node("Max", [node("Div", [hi, const(f"{name}.above", np.array(255.0 - zero_point, dtype=np.float32))],
                                  f"{name}.s_hi"),
                             node("Div", [lo, const(f"{name}.below", np.array(-float(zero_point), dtype=np.float32))],
                                  f"{name}.s_lo"), tiny], f"{name}.scale")
        zeros = node("Expand", [fixed, node("Shape", [scale], f"{name}.rows")], f"{name}.zpu")
        return node("QuantizeLinear", [x2, scale, zeros], f"{name}.q", axis=0), scale, None, fixed

    def linear_int8(x: str, w: np.ndarray, b: np.ndarray, name: str, zero_point: int | None) -> str:
        # Weights: symmetric int8 per output column. Activations: uint8 per token row, the row's
        # scale from its own range, so no row depends on another. x·W + b = s_x·s_w·(q_x − z)·q_w + b.
        # With a fixed zero point z (inputs whose rows sit alike around it) MatMulInteger takes z
        # and the result only needs its two scales and the bias. With a zero point per row
        # (onnxruntime takes only a scalar one for A) it is s_x·s_w·q_x·q_w − (s_x·z)·(s_w·colsum(q_w))
        # + b, the last two terms one rank-2 MatMul [s_x·z, 1] @ [−s_w·colsum; b].
        k, m = w.shape
        w_scale = np.maximum(np.abs(w).max(axis=0), 1e-12).astype(np.float32) / 127.0
        w_q = np.clip(np.round(w / w_scale), -127, 127).astype(np.int8)
        x2 = node("Reshape", [x, const(f"{name}.k", np.array([-1, k], dtype=np.int64))], f"{name}.x2")
        q, scale, zeros, fixed = quantise_rows(x2, name, zero_point)
        if signed_weights:
            acc = node("MatMulInteger", [q, const(f"{name}.wq", w_q), *([fixed] if fixed else [])], f"{name}.mmi")
        else:  # the same integers as uint8 around a zero point of 128: (q_w + 128) − 128 = q_w
            w_u8 = const(f"{name}.wq", (w_q.astype(np.int16) + 128).astype(np.uint8))
            assert weight_zero is not None  # made whenever the weights are unsigned
            acc = node("MatMulInteger", [q, w_u8, fixed or "", weight_zero], f"{name}.mmi")
        rows = node("DequantizeLinear", [acc, scale], f"{name}.deq", axis=0)  # int32 · the row's scale
        y = node("Mul", [rows, const(f"{name}.ws", w_scale)], f"{name}.mm")
        if zeros is None:
            y = node("Add", [y, const(f"{name}.b", b)], f"{name}.y")
        else:
            left = node("Unsqueeze", [node("Mul", [scale, zeros], f"{name}.sz"), axis1], f"{name}.sz2")
            ones = node("Expand", [one_11, node("Shape", [left], f"{name}.lshape")], f"{name}.ones")
            right = np.stack([-(w_q.astype(np.float32).sum(axis=0) * w_scale), b]).astype(np.float32)
            correction = node("MatMul", [node("Concat", [left, ones], f"{name}.left", axis=1),
                                         const(f"{name}.right", right)], f"{name}.corr")
            y = node("Add", [y, correction], f"{name}.y")
        lead = node("Slice", [node("Shape", [x], f"{name}.xshape"), first, last], f"{name}.lead")
        shape = node("Concat", [lead, const(f"{name}.m", np.array([m], dtype=np.int64))], f"{name}.shape", axis=0)
        return node("Reshape", [y, shape], name)

    # Embeddings: word (looked up by the caller) + token type + position (0..L-1).
    word = "word_embeddings"
    types = node("Gather", [const("type_emb", encoder.type_emb), "token_type_ids"], "emb.type", axis=0)
    shape = node("Shape", ["token_type_ids"], "emb.shape")
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
        attn = linear(context, layer.attn_out_w, layer.attn_out_b, f"{p}.attn_out", CONTEXT_ZERO_POINT)
        x = layer_norm(node("Add", [attn, x], f"{p}.attn.res"), layer.attn_ln_w, layer.attn_ln_b, f"{p}.attn.ln")
        h = linear(x, layer.ffn_in_w, layer.ffn_in_b, f"{p}.ffn_in")
        erf = node("Erf", [node("Mul", [h, inv_sqrt2], f"{p}.gelu.s")], f"{p}.gelu.erf")
        gate = node("Mul", [node("Add", [erf, one], f"{p}.gelu.a"), half], f"{p}.gelu.g")
        h = node("Mul", [h, gate], f"{p}.gelu")
        out = linear(h, layer.ffn_out_w, layer.ffn_out_b, f"{p}.ffn_out", GELU_ZERO_POINT)
        x = layer_norm(node("Add", [out, x], f"{p}.ffn.res"), layer.ffn_ln_w, layer.ffn_ln_b, f"{p}.ffn.ln")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="last_hidden_state"))

    def int_input(name: str) -> Any:
        return helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "length"])

    words = helper.make_tensor_value_info("word_embeddings", TensorProto.FLOAT, ["batch", "length", hidden])
    graph = helper.make_graph(
        nodes, "bert", [words, int_input("token_type_ids"), int_input("attention_mask")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "length", hidden])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="engram")
    model.ir_version = min(model.ir_version, 9)  # readable by older onnxruntime builds too
    onnx.checker.check_model(model, full_check=False)
    return model


def make_session(model_bytes: bytes, *, threads: int = 0, arena: bool = False) -> onnxruntime.InferenceSession:
    """A CPU inference session with every graph optimisation on. ``threads`` 0 lets onnxruntime choose.
    ``arena``: onnxruntime keeps the memory of activations for the next run, grown to the largest
    batches that ever ran at once and never given back; without it each run's activations are
    freed when it ends (docs/performance.md, "Memory")."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_cpu_mem_arena = arena
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
