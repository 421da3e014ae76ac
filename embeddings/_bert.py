"""A BERT encoder in plain numpy (float32), for inference only.

It computes what Hugging Face's ``BertModel`` computes in eval mode for the
post-LayerNorm BERT family (BERT, MiniLM, the ms-marco cross-encoders): word + position
+ token-type embeddings, LayerNorm, then per layer self-attention with an additive
padding mask, residual + LayerNorm, an exact-erf GELU feed-forward, residual + LayerNorm.
Weights are read from a ``model.safetensors`` file, with or without the ``bert.`` prefix
that ``BertFor...`` checkpoints use.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from .base import EmbeddingError

_F32 = np.float32
# erf(z) ~ z * P(z^2) / Q(z^2) on z clamped to [-4, 4] (beyond it erf is +-1 in float32):
# Eigen's float32 rational approximation (|error| < 5e-7), also used by XLA. numpy has no
# erf, and scipy would be a heavy dependency for one function.
_ERF_NUM = tuple(_F32(c) for c in (
    -2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
    -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02,
))  # fmt: skip
_ERF_DEN = tuple(_F32(c) for c in (
    -1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
    -1.42647390514189e-02,
))  # fmt: skip
# Elementwise work runs in chunks that stay in cache: whole-array temporaries cost 2-3x more.
_GELU_CHUNK = 131072
_INV_SQRT2 = _F32(1.0 / math.sqrt(2.0))


@dataclass(frozen=True)
class BertConfig:
    """The fields of a Hugging Face BERT ``config.json`` that inference needs."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    layer_norm_eps: float
    num_labels: int

    @classmethod
    def from_dir(cls, model_dir: Path) -> BertConfig:
        """Read ``model_dir/config.json``; raises EmbeddingError if it is missing or not BERT-like."""
        path = model_dir / "config.json"
        try:
            raw: dict[str, Any] = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise EmbeddingError(f"cannot read model config {path}: {exc}") from exc
        if raw.get("hidden_act", "gelu") != "gelu":
            raise EmbeddingError(f"{path}: hidden_act {raw['hidden_act']!r} is not supported (only 'gelu')")
        if raw.get("position_embedding_type", "absolute") != "absolute":
            raise EmbeddingError(f"{path}: only absolute position embeddings are supported")
        try:
            return cls(
                hidden_size=int(raw["hidden_size"]),
                num_hidden_layers=int(raw["num_hidden_layers"]),
                num_attention_heads=int(raw["num_attention_heads"]),
                intermediate_size=int(raw["intermediate_size"]),
                max_position_embeddings=int(raw["max_position_embeddings"]),
                layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
                num_labels=len(raw["id2label"]) if "id2label" in raw else int(raw.get("num_labels", 2)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(f"{path}: missing or invalid field: {exc}") from exc


@dataclass(frozen=True)
class _Layer:
    qkv_w: np.ndarray  # (hidden, 3*hidden), query part pre-scaled by 1/sqrt(head_dim)
    qkv_b: np.ndarray
    attn_out_w: np.ndarray  # (hidden, hidden)
    attn_out_b: np.ndarray
    attn_ln_w: np.ndarray
    attn_ln_b: np.ndarray
    ffn_in_w: np.ndarray  # (hidden, intermediate)
    ffn_in_b: np.ndarray
    ffn_out_w: np.ndarray  # (intermediate, hidden)
    ffn_out_b: np.ndarray
    ffn_ln_w: np.ndarray
    ffn_ln_b: np.ndarray


def load_tokenizer(model_dir: Path, max_length: int) -> Tokenizer:
    """Load ``model_dir/tokenizer.json``, truncating to ``max_length`` tokens and never padding.

    Padding is left to :meth:`BertEncoder.pad`, since callers sort by length first (and the
    shipped tokenizer.json files often pad to a fixed 128, which would waste work).
    """
    path = model_dir / "tokenizer.json"
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on bad files
        raise EmbeddingError(f"cannot load tokenizer {path}: {exc}") from exc
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"


def word_embeddings_mapped(model_dir: Path) -> np.ndarray:
    """The word embedding table of ``model_dir/model.safetensors``, mapped read-only from the file
    instead of read into memory (float32 tables only; raises EmbeddingError otherwise). The rows a
    process looks up are paged in, and every process of the machine shares them."""
    path = model_dir / "model.safetensors"
    try:
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
    except (OSError, ValueError) as exc:
        raise EmbeddingError(f"cannot read the header of {path}: {exc}") from exc
    name = next((k for k in (WORD_EMBEDDINGS, f"bert.{WORD_EMBEDDINGS}") if k in header), None)
    if name is None or header[name]["dtype"] != "F32":
        raise EmbeddingError(f"{path}: no float32 word embedding table to map")
    start, _ = header[name]["data_offsets"]
    return np.memmap(path, dtype=_F32, mode="r", offset=8 + size + start, shape=tuple(header[name]["shape"]))


def _linear_t(weight: np.ndarray) -> np.ndarray:
    """A torch Linear weight (out, in) as a contiguous (in, out) matrix for ``x @ w``."""
    return np.ascontiguousarray(weight.T, dtype=_F32)


class BertEncoder:
    """BERT forward pass over padded batches. Immutable after construction, so thread-safe."""

    def __init__(self, model_dir: Path, config: BertConfig | None = None) -> None:
        """Load ``model_dir/model.safetensors``; raises EmbeddingError on missing or misshapen weights."""
        self.config = config or BertConfig.from_dir(model_dir)
        path = model_dir / "model.safetensors"
        try:
            tensors = load_file(str(path))
        except Exception as exc:  # safetensors raises its own error types plus OSError
            raise EmbeddingError(f"cannot load weights {path}: {exc}") from exc
        prefix = "bert." if any(k.startswith("bert.") for k in tensors) else ""
        try:
            self._load(tensors, prefix)
        except KeyError as exc:
            raise EmbeddingError(f"{path}: missing tensor {exc}") from exc
        # Heads of BertFor... checkpoints (e.g. classifier.*), outside the encoder: kept for callers.
        encoder_parts = tuple(prefix + part for part in ("embeddings.", "encoder.", "pooler."))
        self.extra = {k: np.asarray(v, dtype=_F32) for k, v in tensors.items() if not k.startswith(encoder_parts)}

    def _load(self, t: dict[str, np.ndarray], p: str) -> None:
        cfg = self.config
        head_dim = cfg.hidden_size // cfg.num_attention_heads
        if head_dim * cfg.num_attention_heads != cfg.hidden_size:
            raise EmbeddingError("hidden_size is not a multiple of num_attention_heads")
        scale = _F32(1.0 / math.sqrt(head_dim))

        def f32(name: str) -> np.ndarray:
            return np.asarray(t[p + name], dtype=_F32)

        self.word_emb = f32("embeddings.word_embeddings.weight")
        self.pos_emb = f32("embeddings.position_embeddings.weight")
        self.type_emb = f32("embeddings.token_type_embeddings.weight")
        self.emb_ln_w = f32("embeddings.LayerNorm.weight")
        self.emb_ln_b = f32("embeddings.LayerNorm.bias")
        if self.word_emb.shape[1] != cfg.hidden_size:
            raise EmbeddingError(f"word embeddings have width {self.word_emb.shape[1]}, config says {cfg.hidden_size}")
        self.layers: list[_Layer] = []
        for i in range(cfg.num_hidden_layers):
            a = f"encoder.layer.{i}."
            q_w, k_w, v_w = (_linear_t(f32(f"{a}attention.self.{n}.weight")) for n in ("query", "key", "value"))
            q_b, k_b, v_b = (f32(f"{a}attention.self.{n}.bias") for n in ("query", "key", "value"))
            self.layers.append(
                _Layer(
                    qkv_w=np.ascontiguousarray(np.concatenate([q_w * scale, k_w, v_w], axis=1)),
                    qkv_b=np.concatenate([q_b * scale, k_b, v_b]),
                    attn_out_w=_linear_t(f32(f"{a}attention.output.dense.weight")),
                    attn_out_b=f32(f"{a}attention.output.dense.bias"),
                    attn_ln_w=f32(f"{a}attention.output.LayerNorm.weight"),
                    attn_ln_b=f32(f"{a}attention.output.LayerNorm.bias"),
                    ffn_in_w=_linear_t(f32(f"{a}intermediate.dense.weight")),
                    ffn_in_b=f32(f"{a}intermediate.dense.bias"),
                    ffn_out_w=_linear_t(f32(f"{a}output.dense.weight")),
                    ffn_out_b=f32(f"{a}output.dense.bias"),
                    ffn_ln_w=f32(f"{a}output.LayerNorm.weight"),
                    ffn_ln_b=f32(f"{a}output.LayerNorm.bias"),
                )
            )
        self.pooler_w = _linear_t(f32("pooler.dense.weight")) if p + "pooler.dense.weight" in t else None
        self.pooler_b = f32("pooler.dense.bias") if self.pooler_w is not None else None

    @staticmethod
    def pad(encodings: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pad ``tokenizers`` encodings to the longest: (input_ids, token_type_ids, attention_mask), int64 (B, L)."""
        length = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), length), dtype=np.int64)
        types = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            types[row, :n] = enc.type_ids
            mask[row, :n] = 1
        return ids, types, mask

    def forward(self, input_ids: np.ndarray, token_type_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """Last hidden states, float32 (B, L, hidden). Inputs are int arrays (B, L); mask is 1 for real tokens."""
        cfg = self.config
        batch, length = input_ids.shape
        if length > cfg.max_position_embeddings:
            raise EmbeddingError(f"{length} tokens exceed max_position_embeddings {cfg.max_position_embeddings}")
        hidden, heads = cfg.hidden_size, cfg.num_attention_heads
        head_dim = hidden // heads
        eps = cfg.layer_norm_eps

        x = self.word_emb[input_ids] + self.type_emb[token_type_ids] + self.pos_emb[:length]
        x = _layer_norm(x.reshape(batch * length, hidden), self.emb_ln_w, self.emb_ln_b, eps)
        # Additive mask as in transformers: dtype minimum on padded keys, so exp() gives exactly 0.
        mask_bias = ((1.0 - attention_mask.astype(_F32)) * np.finfo(_F32).min)[:, None, None, :]

        for layer in self.layers:
            qkv = x @ layer.qkv_w
            qkv += layer.qkv_b
            q, k, v = qkv.reshape(batch, length, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
            scores = q @ k.transpose(0, 1, 3, 2)  # (B, heads, L, L); q is pre-scaled
            scores += mask_bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, hidden)
            attn = context @ layer.attn_out_w
            attn += layer.attn_out_b
            attn += x
            x = _layer_norm(attn, layer.attn_ln_w, layer.attn_ln_b, eps)
            h = x @ layer.ffn_in_w
            h += layer.ffn_in_b
            _gelu_inplace(h)
            out = h @ layer.ffn_out_w
            out += layer.ffn_out_b
            out += x
            x = _layer_norm(out, layer.ffn_ln_w, layer.ffn_ln_b, eps)
        return x.reshape(batch, length, hidden)

    def pool(self, hidden_states: np.ndarray) -> np.ndarray:
        """BERT pooler: tanh(dense([CLS])), float32 (B, hidden). Raises EmbeddingError if the checkpoint has none."""
        if self.pooler_w is None or self.pooler_b is None:
            raise EmbeddingError("this checkpoint has no pooler weights")
        return np.tanh(hidden_states[:, 0] @ self.pooler_w + self.pooler_b)


def mean_pool(hidden_states: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Mean of the hidden states over real (mask == 1) tokens, float32 (B, hidden)."""
    mask = attention_mask.astype(_F32)[:, :, None]
    summed = (hidden_states * mask).sum(axis=1)
    return summed / np.maximum(mask.sum(axis=1), _F32(1e-9))


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (rows of zeros stay zero), float32."""
    vectors = np.asarray(vectors, dtype=_F32)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, _F32(1e-12))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(np.square(centred), axis=-1, keepdims=True)
    centred *= 1.0 / np.sqrt(var + _F32(eps))
    centred *= weight
    centred += bias
    return centred


def _gelu_inplace(x: np.ndarray) -> None:
    """x <- 0.5 * x * (1 + erf(x / sqrt(2))), the exact (erf, not tanh) GELU BERT uses, in float32."""
    flat = x.reshape(-1)  # a view: x is contiguous
    for start in range(0, flat.size, _GELU_CHUNK):
        chunk = flat[start : start + _GELU_CHUNK]
        z = chunk * _INV_SQRT2
        np.clip(z, -4.0, 4.0, out=z)
        z2 = z * z
        num = z2 * _ERF_NUM[0]
        for c in _ERF_NUM[1:-1]:
            num += c
            num *= z2
        num += _ERF_NUM[-1]
        num *= z
        den = z2 * _ERF_DEN[0]
        for c in _ERF_DEN[1:-1]:
            den += c
            den *= z2
        den += _ERF_DEN[-1]
        num /= den  # erf(z)
        num += 1.0
        num *= 0.5
        chunk *= num
