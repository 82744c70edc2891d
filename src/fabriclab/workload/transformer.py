"""Transformer LLMs (dense and mixture-of-experts) as pure data: shapes, parameter counts, FLOPs per token.

A `TransformerSpec` is what a training simulator needs of a decoder-only LLM: the matrix shapes of its
attention and MLP (gated SwiGLU or plain GELU), grouped-query attention, routed and shared experts and which
layers have them. It comes from a built-in name (`list_llms()`: the `llm_models/*.json` files, each citing
its source in `_source`) or from any HuggingFace-style `config.json` (`load_model`).

Counting conventions:
- Parameters are the weight matrices (Q, K, V, O; gate/up/down or fc1/fc2; routers; embeddings) plus two
  norms per layer and the final norm (h each). Biases and learned position embeddings (GPT-2/3) are not
  counted: < 0.1 % of a large model.
- FLOPs are 2 x multiply-adds of the matrix multiplications, per token, forward; the attention core
  (QK^T and attention x V) is 4 x seq x h per token and layer, without the causal mask's saving, as in
  Megatron-LM's MFU formula (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM", appendix): for GPT-3 175B, 3 x forward x 2048 tokens = 2.20e15 per sample.
- Attention heads are `head_dim` wide where config.json says so (Qwen3: 128 at hidden 2048 and 32 heads),
  else hidden / heads. Multi-head latent attention (DeepSeek-V2/V3) is counted as it runs: the low-rank
  query and key-value projections (q_lora_rank, kv_lora_rank) and their up projections, heads of
  qk_nope_head_dim + qk_rope_head_dim in the scores and v_head_dim in the values (DeepSeek-V3: 192 and 128,
  2.9x the scores' FLOPs of 128 heads of 56); the multi-token prediction modules (num_nextn_predict_layers)
  count in the FLOPs (Megatron-LM's convention) and not in `num_params` (DeepSeek's 671e9).

Try it: `python -c "from fabriclab.workload.transformer import load_model; m = load_model('llama3-70b');
print(m.num_params() / 1e9, m.model_flops_per_token() / 1e9)"` or `fabriclab models llama3-70b`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path

from fabriclab.textfile import read_text

# Default training sequence length when a config.json names none (`seq_length`): its
# max_position_embeddings, capped here, because long-context windows (Llama 3.1: 131072, DeepSeek-V3:
# 163840) are reached in a separate late stage of training; 8192 is Llama 3's pretraining length.
MAX_DEFAULT_SEQ = 8192
_GATED_ACTS = ("silu", "swish", "swiglu")
_PLAIN_ACTS = ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "quick_gelu", "relu")


@dataclass(frozen=True, kw_only=True)
class TransformerSpec:
    """A decoder-only transformer LLM (validated on construction: a ValueError says what to change)."""

    name: str
    """Built-in name (`llama3-70b`) or the config.json's folder name."""
    hidden_size: int
    """Model width h."""
    intermediate_size: int
    """Width of a dense layer's MLP (ffn)."""
    num_layers: int
    """Transformer layers L."""
    num_heads: int
    """Attention (query) heads a."""
    num_kv_heads: int
    """Key/value heads (grouped-query attention; = num_heads for multi-head attention)."""
    vocab_size: int
    """Vocabulary V (input embedding and output layer rows)."""
    seq_length: int
    """Default training sequence length in tokens."""
    gated_mlp: bool = True
    """SwiGLU MLP (three matrices: gate, up, down) rather than a GELU MLP (two)."""
    tied_embeddings: bool = False
    """Output layer shares the input embedding's matrix."""
    num_experts: int = 0
    """Routed experts per MoE layer (0: a dense model)."""
    experts_per_token: int = 0
    """Routed experts each token goes to (top-k)."""
    moe_intermediate_size: int = 0
    """MLP width of one expert (routed or shared)."""
    num_shared_experts: int = 0
    """Experts every token goes through in an MoE layer (DeepSeek)."""
    first_dense_layers: int = 0
    """The first layers keep a dense MLP (DeepSeek's first_k_dense_replace)."""
    moe_layer_freq: int = 1
    """After the dense ones, every k-th layer is an MoE layer (1: all of them)."""
    attention_head_dim: int = 0
    """Width of one attention head (config.json's `head_dim`; MLA: `qk_nope_head_dim`); 0: hidden_size /
    num_heads. Qwen3's heads are 128 wide at a hidden size of 2048 with 32 heads: twice hidden / heads."""
    q_lora_rank: int = 0
    """Multi-head latent attention (DeepSeek-V2/V3): rank of the queries' low-rank projection (0: a full
    query projection)."""
    kv_lora_rank: int = 0
    """MLA: rank of the keys' and values' joint low-rank projection (0: not MLA)."""
    qk_rope_head_dim: int = 0
    """MLA: the rotary part of each query and key head, beside its `attention_head_dim` (the key's is shared
    by the heads)."""
    v_head_dim: int = 0
    """MLA: width of one value head (0: the head width)."""
    mtp_layers: int = 0
    """Multi-token prediction modules (DeepSeek-V3's num_nextn_predict_layers): each a projection of 2h to h
    and one more MoE layer, with the output layer and the loss again, on the last pipeline stage."""
    source: str = ""
    """Where the numbers come from (HuggingFace repository, paper)."""

    def __post_init__(self) -> None:
        for key in ("hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads",
                    "vocab_size", "seq_length", "moe_layer_freq"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{self.name}: {key} {value!r}: give a whole number >= 1")
        for key in ("num_experts", "experts_per_token", "moe_intermediate_size", "num_shared_experts",
                    "first_dense_layers", "attention_head_dim", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim",
                    "v_head_dim", "mtp_layers"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{self.name}: {key} {value!r}: give a whole number >= 0")
        if (self.hidden_size % self.num_heads and not self.attention_head_dim) or self.num_heads % self.num_kv_heads:
            raise ValueError(f"{self.name}: hidden_size {self.hidden_size}, num_heads {self.num_heads} and "
                             f"num_kv_heads {self.num_kv_heads}: heads must divide the hidden size (or give "
                             f"head_dim) and kv heads must divide the heads")
        if self.num_experts and not 1 <= self.experts_per_token <= self.num_experts:
            raise ValueError(f"{self.name}: experts_per_token {self.experts_per_token}: give 1 to "
                             f"num_experts ({self.num_experts})")
        if self.num_experts and not self.moe_intermediate_size:
            raise ValueError(f"{self.name}: an MoE model needs moe_intermediate_size (an expert's MLP width)")
        if self.first_dense_layers > self.num_layers:
            raise ValueError(f"{self.name}: first_dense_layers {self.first_dense_layers} > num_layers "
                             f"{self.num_layers}")

    @property
    def head_dim(self) -> int:
        """Width of one attention head (MLA: of its non-rotary part)."""
        return self.attention_head_dim or self.hidden_size // self.num_heads

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2/V3): keys and values from one low-rank projection."""
        return self.kv_lora_rank > 0

    @property
    def qk_head_dim(self) -> int:
        """Width of one query and key head in the attention's scores (MLA: with its rotary part)."""
        return self.head_dim + self.qk_rope_head_dim

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def is_moe_layer(self, index: int) -> bool:
        """Layer `index` (0-based) has experts: after the first dense layers, every moe_layer_freq-th.
        (DeepSeek's modelling code tests index % freq instead; the same for freq 1.)"""
        if 0 <= index < self.num_layers:
            return self._moe_flags[index]
        return self._moe_rule(index)

    def _moe_rule(self, index: int) -> bool:
        if not self.is_moe or index < self.first_dense_layers:
            return False
        return (index - self.first_dense_layers) % self.moe_layer_freq == 0

    @cached_property
    def _moe_flags(self) -> tuple[bool, ...]:
        """`is_moe_layer` of every layer, worked out once (a plan asks millions of times)."""
        return tuple(self._moe_rule(i) for i in range(self.num_layers))

    @property
    def num_moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.num_layers))

    @property
    def num_dense_layers(self) -> int:
        return self.num_layers - self.num_moe_layers

    def attention_params(self) -> int:
        return self._attention_params

    @cached_property
    def _attention_params(self) -> int:
        """Q, K, V and O projections of one layer (K and V have num_kv_heads heads of head_dim). MLA: the
        queries' down (h x q_lora_rank) and up (q_lora_rank x heads x qk_head_dim) projections, the keys' and
        values' down projection (h x (kv_lora_rank + qk_rope_head_dim)) and up projection (kv_lora_rank x
        heads x (head_dim + value_head_dim)), the two low-rank norms, the output (heads x value_head_dim x h)."""
        h, heads = self.hidden_size, self.num_heads
        out = heads * self.value_head_dim * h
        if not self.is_mla:
            return h * heads * self.head_dim + 2 * h * self.num_kv_heads * self.head_dim + out
        q_lora, kv_lora = self.q_lora_rank, self.kv_lora_rank
        q = (h * q_lora + q_lora + q_lora * heads * self.qk_head_dim) if q_lora else h * heads * self.qk_head_dim
        kv = h * (kv_lora + self.qk_rope_head_dim) + kv_lora + kv_lora * heads * (self.head_dim + self.value_head_dim)
        return q + kv + out

    def attention_core_flops_per_token(self, seq: int) -> float:
        """Forward FLOPs of one layer's scores (Q K^T) and values (A V) per token at sequence length `seq`,
        without the causal mask's saving (module doc): 2 seq heads (qk_head_dim + value_head_dim)."""
        return 2.0 * seq * self.num_heads * (self.qk_head_dim + self.value_head_dim)

    def norm_params(self) -> int:
        """The two norms of one layer (RMSNorm scale or LayerNorm scale: h each; LayerNorm's shift not
        counted)."""
        return 2 * self.hidden_size

    def _mlp(self, width: int) -> int:
        return (3 if self.gated_mlp else 2) * self.hidden_size * width

    def mlp_params(self) -> int:
        """MLP of one dense layer."""
        return self._mlp(self.intermediate_size)

    def expert_params(self) -> int:
        """One routed expert (an MLP of moe_intermediate_size)."""
        return self._mlp(self.moe_intermediate_size)

    def shared_expert_params(self) -> int:
        """All shared experts of one MoE layer."""
        return self.num_shared_experts * self.expert_params()

    def router_params(self) -> int:
        """The gate of one MoE layer: h x num_experts."""
        return self.hidden_size * self.num_experts

    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    def output_params(self) -> int:
        """The output layer (0 when tied to the embedding)."""
        return 0 if self.tied_embeddings else self.vocab_size * self.hidden_size

    def layer_params(self, index: int) -> tuple[int, int]:
        """(non-expert, routed-expert) parameters of layer `index`: how parallelism splits them differs."""
        return self._layer_params[self.is_moe_layer(index)]

    @cached_property
    def _layer_params(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """`layer_params` of a dense and of an MoE layer, worked out once."""
        common = self.attention_params() + self.norm_params()
        dense = common + self.mlp_params(), 0
        if not self.is_moe:
            return dense, dense
        return dense, (common + self.shared_expert_params() + self.router_params(),
                       self.num_experts * self.expert_params())

    def mtp_params(self) -> int:
        """The multi-token prediction modules (not in `num_params`, as DeepSeek's 671e9 leaves them out):
        each two norms and a projection of 2h to h, a layer like the last one, a final norm (the embedding
        and the output layer are shared)."""
        h = self.hidden_size
        return self.mtp_layers * (3 * h + 2 * h * h + sum(self.layer_params(self.num_layers - 1)))

    def num_params(self) -> int:
        layers = sum(sum(self.layer_params(i)) for i in range(self.num_layers))
        return layers + self.embedding_params() + self.output_params() + self.hidden_size

    def num_active_params(self) -> int:
        """Parameters one token uses: the top-k routed experts of each MoE layer, not all of them."""
        inactive = (self.num_experts - self.experts_per_token) * self.expert_params()
        return self.num_params() - self.num_moe_layers * inactive

    def forward_flops_per_token(self, seq: int | None = None) -> dict[str, float]:
        """Forward FLOPs per token by part, summed over layers, at sequence length `seq` (default: the
        model's): attention (projections), attention_scores (QK^T and AV), mlp (dense layers), experts
        (top-k routed + shared + router of the MoE layers), logits (output layer), mtp (the multi-token
        prediction modules, each a projection, a layer like the last and the logits again: Megatron-LM counts
        them)."""
        seq = self.seq_length if seq is None else seq
        moe = self.num_moe_layers
        routed = self.experts_per_token * self.expert_params()
        experts = routed + self.shared_expert_params() + self.router_params()
        logits = 2.0 * self.vocab_size * self.hidden_size
        last = experts if self.is_moe_layer(self.num_layers - 1) else self.mlp_params()
        mtp = self.mtp_layers * (2.0 * (2 * self.hidden_size ** 2 + self.attention_params() + last)
                                 + self.attention_core_flops_per_token(seq) + logits)
        return {
            "attention": 2.0 * self.num_layers * self.attention_params(),
            "attention_scores": self.num_layers * self.attention_core_flops_per_token(seq),
            "mlp": 2.0 * self.num_dense_layers * self.mlp_params(),
            "experts": 2.0 * moe * experts,
            "logits": logits,
            **({"mtp": mtp} if self.mtp_layers else {}),
        }

    def model_flops_per_token(self, seq: int | None = None) -> float:
        """Forward + backward (3 x forward) FLOPs per token: the MFU convention (no recomputation)."""
        return 3.0 * sum(self.forward_flops_per_token(seq).values())


def list_llms() -> list[str]:
    """Names of the built-in LLMs."""
    return sorted(p.name[:-5] for p in _builtin_dir().iterdir() if p.name.endswith(".json"))


def load_model(name_or_path: str) -> TransformerSpec:
    """A built-in LLM by name, or a HuggingFace-style config.json (or a folder holding one)."""
    name = str(name_or_path)
    if name in list_llms():
        text, where = (_builtin_dir() / f"{name}.json").read_text(), f"built-in {name}"
        return spec_from_config(json.loads(text), name=name, where=where)
    path = Path(name)
    if path.is_dir() and not (path / "config.json").is_file():
        raise ValueError(f"{name}: the folder has no config.json; give a HuggingFace config.json or a folder "
                         f"holding one")
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        try:
            config = json.loads(read_text(path))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not a JSON config.json ({exc}): give a HuggingFace config.json") from None
        except OSError as exc:
            raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
        stem = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
        return spec_from_config(config, name=stem, where=str(path))
    if name.endswith(".json") or "/" in name:
        raise ValueError(f"{name}: no such file; give the path of a HuggingFace config.json or one of "
                         f"{', '.join(list_llms())}")
    raise ValueError(f"unknown LLM {name!r}: give one of {', '.join(list_llms())}, or the path of a "
                     f"HuggingFace config.json")


def spec_from_config(config: dict, *, name: str, where: str = "config.json") -> TransformerSpec:
    """A spec from a HuggingFace config.json's keys (Llama, Mistral/Mixtral, Qwen, DeepSeek, GPT-2 style).

    Sequence length: `seq_length` when given, else max_position_embeddings (GPT-2: n_positions) capped at
    MAX_DEFAULT_SEQ. MLP: gated for silu/swish (and Gemma's GeGLU), plain for gelu/relu. A ValueError names
    `where` and the key that is missing or wrong."""
    if not isinstance(config, dict):
        raise ValueError(f"{where}: expected a JSON object of HuggingFace config keys")
    gpt2 = "n_embd" in config

    def get(*keys: str, default=None, minimum: int | None = 1):
        """The first of `keys` the config holds (else `default`), a whole number >= `minimum` unless None."""
        key = next((k for k in keys if config.get(k) is not None), None)
        if key is None and default is None:
            raise ValueError(f"{where}: missing key {keys[0]!r} (a HuggingFace config.json needs it)")
        value = default if key is None else config[key]
        if minimum is not None and (not isinstance(value, int) or isinstance(value, bool) or value < minimum):
            raise ValueError(f"{where}: {key or keys[0]} {value!r}: give a whole number >= {minimum}")
        return value

    hidden = get("n_embd") if gpt2 else get("hidden_size")
    heads = get("n_head") if gpt2 else get("num_attention_heads")
    act = str(get("activation_function", default="gelu_new", minimum=None) if gpt2 else
              get("hidden_act", default="silu", minimum=None))
    model_type = str(config.get("model_type", ""))
    if act not in _GATED_ACTS + _PLAIN_ACTS:
        raise ValueError(f"{where}: hidden_act {act!r} is not known here: use one of "
                         f"{', '.join(_GATED_ACTS + _PLAIN_ACTS)}")
    experts = get(*_EXPERT_KEYS, default=0, minimum=0)
    _check_moe_keys(config, experts, where)
    ffn = get("n_inner", default=4 * hidden) if gpt2 else get("intermediate_size")
    seq = config.get("seq_length")
    if seq is None:
        seq = get("n_positions") if gpt2 else get("max_position_embeddings")
        seq = min(seq, MAX_DEFAULT_SEQ)
    seq = get("seq_length", default=seq)
    moe = bool(experts)
    fields = dict(
        hidden_size=hidden,
        intermediate_size=ffn,
        num_layers=get("n_layer") if gpt2 else get("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=heads if gpt2 else get("num_key_value_heads", default=heads),
        vocab_size=get("vocab_size"),
        seq_length=seq,
        gated_mlp=act in _GATED_ACTS or model_type.startswith("gemma"),
        tied_embeddings=bool(get("tie_word_embeddings", default=gpt2, minimum=None)),
        num_experts=experts,
        experts_per_token=get("num_experts_per_tok", default=0, minimum=0) if moe else 0,
        # Mixtral's experts are intermediate_size wide; DeepSeek and Qwen-MoE name their width apart
        moe_intermediate_size=get("moe_intermediate_size", "intermediate_size") if moe else 0,
        num_shared_experts=_shared_experts(config, get, where) if moe else 0,
        first_dense_layers=get("first_k_dense_replace", default=0, minimum=0) if moe else 0,
        moe_layer_freq=get("moe_layer_freq", default=1) if moe else 1,
        **_attention_keys(config, get),
        mtp_layers=get("num_nextn_predict_layers", "mtp_num_layers", default=0, minimum=0),
    )
    try:
        return TransformerSpec(name=name, source=str(config.get("_source", where)), **fields)
    except ValueError as exc:  # the spec's own checks name its fields; say which file they come from
        raise ValueError(f"{where}: {str(exc).removeprefix(f'{name}: ')}") from None


# The expert count's key in Mixtral's, DeepSeek's and Qwen-MoE's config.json, and keys only an MoE model has:
# with these and no expert count the model was read as dense (the simulator priced a model it was not given).
_EXPERT_KEYS = ("num_local_experts", "n_routed_experts", "num_experts")
_MOE_ONLY_KEYS = ("num_experts_per_tok", "moe_intermediate_size", "n_shared_experts")


def _attention_keys(config: dict, get) -> dict:
    """The attention's widths: `head_dim` where given (Qwen3, Gemma, Mistral), MLA's ranks and head parts
    (DeepSeek-V2/V3: `kv_lora_rank` names it; all of its keys are then needed)."""
    if config.get("kv_lora_rank"):
        return dict(attention_head_dim=get("qk_nope_head_dim"), q_lora_rank=get("q_lora_rank", default=0, minimum=0),
                    kv_lora_rank=get("kv_lora_rank"), qk_rope_head_dim=get("qk_rope_head_dim", minimum=0),
                    v_head_dim=get("v_head_dim"))
    return dict(attention_head_dim=get("head_dim", default=0, minimum=0))


def _shared_experts(config: dict, get, where: str) -> int:
    """Shared experts: DeepSeek's n_shared_experts, or Qwen2-MoE's one shared expert of
    shared_expert_intermediate_size, counted in experts of moe_intermediate_size (Qwen2-57B-A14B: 20480 / 2560
    = 8)."""
    width = config.get("shared_expert_intermediate_size")
    if not width:
        return get("n_shared_experts", default=0, minimum=0)
    expert = get("moe_intermediate_size", "intermediate_size")
    if not isinstance(width, int) or isinstance(width, bool) or width % expert:
        raise ValueError(f"{where}: shared_expert_intermediate_size {width!r} is not a whole multiple of "
                         f"moe_intermediate_size {expert}: give the shared expert's width in experts' widths")
    return width // expert


def _check_moe_keys(config: dict, experts: int, where: str) -> None:
    given = [k for k in _MOE_ONLY_KEYS if config.get(k)]
    if given and not experts:
        raise ValueError(f"{where}: {', '.join(given)} describe a mixture-of-experts model, but no expert count is "
                         f"given: add {' (Mixtral), '.join(_EXPERT_KEYS[:2])} (DeepSeek) or {_EXPERT_KEYS[2]} "
                         f"(Qwen-MoE) > 0, or drop them for a dense model")


def spec_to_config(spec: TransformerSpec) -> dict:
    """The HuggingFace config.json keys of `spec` (`spec_from_config` reads them back to an equal spec)."""
    config = {"_source": spec.source, "hidden_size": spec.hidden_size,
              "intermediate_size": spec.intermediate_size, "num_hidden_layers": spec.num_layers,
              "num_attention_heads": spec.num_heads, "num_key_value_heads": spec.num_kv_heads,
              "vocab_size": spec.vocab_size, "max_position_embeddings": spec.seq_length,
              "seq_length": spec.seq_length, "hidden_act": "silu" if spec.gated_mlp else "gelu",
              "tie_word_embeddings": spec.tied_embeddings}
    if spec.is_moe:
        config |= {"n_routed_experts": spec.num_experts, "num_experts_per_tok": spec.experts_per_token,
                   "moe_intermediate_size": spec.moe_intermediate_size,
                   "n_shared_experts": spec.num_shared_experts,
                   "first_k_dense_replace": spec.first_dense_layers, "moe_layer_freq": spec.moe_layer_freq}
    if spec.is_mla:
        config |= {"q_lora_rank": spec.q_lora_rank, "kv_lora_rank": spec.kv_lora_rank,
                   "qk_nope_head_dim": spec.head_dim, "qk_rope_head_dim": spec.qk_rope_head_dim,
                   "v_head_dim": spec.value_head_dim}
    elif spec.attention_head_dim:
        config["head_dim"] = spec.attention_head_dim
    if spec.mtp_layers:
        config["num_nextn_predict_layers"] = spec.mtp_layers
    return config


def _builtin_dir():
    return resources.files("fabriclab.workload") / "llm_models"
