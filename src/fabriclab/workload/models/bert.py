"""BERT-base: the encoder of Devlin et al. 2019 with its pooler, as HuggingFace's `BertModel`.

12 layers, hidden size 768, 12 heads, feed-forward 3072, vocabulary 30522, 512 positions, 2 token
types (the `bert-base-uncased` configuration); parameter names follow HuggingFace
(`encoder.layer.0.attention.self.query.weight`). No pre-training heads. The attention product
(softmax(QK^T / sqrt(d)) V) is its own leaf module, `attention.self.core`, so that per-layer timings
and FLOP tables account for it.

Try it: `python -c "from fabriclab.workload.models.bert import build; print(sum(p.numel() for p in build().parameters()))"`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

# bert-base-uncased's config.json (HuggingFace hub) and Devlin et al. 2019, section 3.
VOCAB_SIZE, MAX_POSITIONS, TYPE_VOCAB_SIZE = 30522, 512, 2
HIDDEN, NUM_LAYERS, NUM_HEADS, INTERMEDIATE = 768, 12, 12, 3072
LAYER_NORM_EPS, DROPOUT, INIT_STD = 1e-12, 0.1, 0.02


class AttentionCore(nn.Module):
    """Multi-head scaled dot-product attention on already projected queries, keys and values."""

    def __init__(self, num_heads: int, dropout: float) -> None:
        super().__init__()
        self.num_heads, self.dropout = num_heads, dropout

    def heads(self, x: Tensor) -> Tensor:
        batch, length, width = x.shape
        return x.view(batch, length, self.num_heads, width // self.num_heads).transpose(1, 2)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
        q, k, v = self.heads(query), self.heads(key), self.heads(value)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores + mask
        probs = F.dropout(scores.softmax(-1), self.dropout, self.training)
        out = probs @ v
        return out.transpose(1, 2).reshape(query.shape)

    def flops(self, query: Tensor, key: Tensor) -> int:
        """2 x multiply-adds of QK^T and of probs x V."""
        batch, q_len, width = query.shape
        return 2 * 2 * batch * q_len * key.shape[1] * width


class SelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.query, self.key, self.value = (nn.Linear(HIDDEN, HIDDEN) for _ in range(3))
        self.core = AttentionCore(NUM_HEADS, DROPOUT)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        return self.core(self.query(x), self.key(x), self.value(x), mask)


class AddNorm(nn.Module):
    """Dense, dropout, residual add, layer norm (HuggingFace's `BertSelfOutput` and `BertOutput`)."""

    def __init__(self, in_features: int) -> None:
        super().__init__()
        self.dense = nn.Linear(in_features, HIDDEN)
        self.dropout = nn.Dropout(DROPOUT)
        self.LayerNorm = nn.LayerNorm(HIDDEN, eps=LAYER_NORM_EPS)

    def forward(self, x: Tensor, residual: Tensor) -> Tensor:
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.self = SelfAttention()
        self.output = AddNorm(HIDDEN)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        return self.output(self.self(x, mask), x)


class Intermediate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dense = nn.Linear(HIDDEN, INTERMEDIATE)
        self.act = nn.GELU()

    def forward(self, x: Tensor) -> Tensor:
        return self.act(self.dense(x))


class Layer(nn.Module):
    """One transformer encoder layer: self-attention, then the feed-forward block."""

    def __init__(self) -> None:
        super().__init__()
        self.attention = Attention()
        self.intermediate = Intermediate()
        self.output = AddNorm(INTERMEDIATE)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        x = self.attention(x, mask)
        return self.output(self.intermediate(x), x)


class Embeddings(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB_SIZE, HIDDEN, padding_idx=0)
        self.position_embeddings = nn.Embedding(MAX_POSITIONS, HIDDEN)
        self.token_type_embeddings = nn.Embedding(TYPE_VOCAB_SIZE, HIDDEN)
        self.LayerNorm = nn.LayerNorm(HIDDEN, eps=LAYER_NORM_EPS)
        self.dropout = nn.Dropout(DROPOUT)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor) -> Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)
             + self.token_type_embeddings(token_type_ids))
        return self.dropout(self.LayerNorm(x))


class Encoder(nn.Module):
    def __init__(self, num_layers: int) -> None:
        super().__init__()
        self.layer = nn.ModuleList(Layer() for _ in range(num_layers))

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        for layer in self.layer:
            x = layer(x, mask)
        return x


class Pooler(nn.Module):
    """Dense + tanh on the first ([CLS]) token."""

    def __init__(self) -> None:
        super().__init__()
        self.dense = nn.Linear(HIDDEN, HIDDEN)
        self.activation = nn.Tanh()

    def forward(self, x: Tensor) -> Tensor:
        return self.activation(self.dense(x[:, 0]))


class BertModel(nn.Module):
    """Embeddings, encoder, pooler; returns (sequence output, pooled output)."""

    def __init__(self, num_layers: int) -> None:
        super().__init__()
        self.embeddings = Embeddings()
        self.encoder = Encoder(num_layers)
        self.pooler = Pooler()
        for module in self.modules():
            # BERT's initializer_range: N(0, 0.02) for weights, zero biases (Devlin et al. 2019 code).
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=INIT_STD)
            if isinstance(module, nn.Linear):
                nn.init.zeros_(module.bias)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None,
                attention_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        mask = None
        if attention_mask is not None:  # 1 = attend, 0 = padding -> additive -inf-like bias
            mask = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        sequence = self.encoder(self.embeddings(input_ids, token_type_ids), mask)
        return sequence, self.pooler(sequence)


def build(*, num_layers: int = NUM_LAYERS) -> BertModel:
    """BERT-base (12 layers); fewer layers for quick tests."""
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    return BertModel(num_layers)
