"""Build a model: from its transformers config with random init (default) or from local weights.

No weights can be downloaded here, so by default every model is its real architecture with randomly
initialised weights: the compute cost is real, the predictions are not. `model:` (server flag --model)
names a local directory or a hub id already in the local Hugging Face cache; loading never touches the
network (hub offline mode is forced around every from_pretrained call and local_files_only=True).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from reference_server.workloads.base import WorkloadConfigError

if TYPE_CHECKING:
    import torch

MIN_SHIPPED_VOCAB = 100  # smaller "tokenizers" are placeholders, not a shipped vocabulary

# Architecture sizes per family. "base" is the transformers default config of the family (the
# published base model's shape); "small" is the usual smaller sibling; "tiny" is for tests.
SIZE_PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "vit": {  # ViT-B/16, ViT-S/16, tiny
        "base": {},
        "small": {"hidden_size": 384, "num_attention_heads": 6, "intermediate_size": 1536},
        "tiny": {
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "image_size": 32,
            "patch_size": 8,
        },
    },
    "bert": {  # bert-base-uncased, bert-small (4 layers x 512), tiny
        "base": {},
        "small": {
            "hidden_size": 512,
            "num_hidden_layers": 4,
            "num_attention_heads": 8,
            "intermediate_size": 2048,
        },
        "tiny": {
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "vocab_size": 1024,
            "max_position_embeddings": 128,
        },
    },
    "minilm": {  # all-MiniLM-L6-v2's shape (a 6-layer, 384-wide BERT), a 3-layer one, tiny
        "base": {
            "hidden_size": 384,
            "num_hidden_layers": 6,
            "num_attention_heads": 12,
            "intermediate_size": 1536,
        },
        "small": {
            "hidden_size": 384,
            "num_hidden_layers": 3,
            "num_attention_heads": 12,
            "intermediate_size": 1536,
        },
        "tiny": {
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "vocab_size": 1024,
            "max_position_embeddings": 128,
        },
    },
    "wav2vec2": {  # wav2vec2-base's shape with a layer-norm feature encoder (so padding is masked)
        "base": {"feat_extract_norm": "layer", "conv_bias": True},
        "small": {
            "feat_extract_norm": "layer",
            "conv_bias": True,
            "hidden_size": 384,
            "num_hidden_layers": 6,
            "num_attention_heads": 6,
            "intermediate_size": 1536,
            "conv_dim": (256,) * 7,
            "num_conv_pos_embedding_groups": 8,
        },
        "tiny": {
            "feat_extract_norm": "layer",
            "conv_bias": True,
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "conv_dim": (32, 32, 32),
            "conv_stride": (5, 4, 4),
            "conv_kernel": (10, 4, 4),
            "num_conv_pos_embeddings": 16,
            "num_conv_pos_embedding_groups": 2,
            "classifier_proj_size": 16,
        },
    },
    "gpt2": {  # gpt2 (124M), distilgpt2's shape, tiny
        "base": {},
        "small": {"n_layer": 6},
        "tiny": {
            "n_embd": 32,
            "n_layer": 2,
            "n_head": 2,
            "n_positions": 256,
            "vocab_size": 1024,
            "bos_token_id": 0,
            "eos_token_id": 0,
        },
    },
}


def build_config(
    config_cls: Any, family: str, size: str, overrides: dict[str, Any], extra: dict[str, Any] | None = None
) -> Any:
    """Size preset + `extra` (labels) + user overrides -> a config; unknown override keys are errors."""
    defaults = config_cls()
    unknown = sorted(k for k in overrides if not hasattr(defaults, k))
    if unknown:
        raise WorkloadConfigError(
            f"params.config: unknown {config_cls.__name__} keys {', '.join(unknown)}; "
            f"expected attributes of {config_cls.__name__} (e.g. num_hidden_layers, hidden_size)"
        )
    kwargs = {**SIZE_PRESETS[family][size], **(extra or {}), **overrides}
    try:
        return config_cls(**kwargs)
    except (TypeError, ValueError) as exc:
        expected = f"not a valid {config_cls.__name__} ({exc})"
        raise WorkloadConfigError(f"params.config = {overrides!r}: {expected}") from None


def random_model(model_cls: Any, config: Any, seed: int) -> torch.nn.Module:
    """The architecture with random weights, seeded without disturbing the global RNG."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model: torch.nn.Module = model_cls(config)
    return model


@contextmanager
def hub_offline() -> Iterator[None]:
    """Force huggingface_hub's offline mode (as HF_HUB_OFFLINE=1 does) for the duration."""
    import huggingface_hub.constants as hub_constants

    before = hub_constants.HF_HUB_OFFLINE
    hub_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        hub_constants.HF_HUB_OFFLINE = before


def pretrained_model(auto_cls: Any, name: str, dtype: torch.dtype) -> torch.nn.Module:
    """`auto_cls.from_pretrained(name)` from local files only; a clear error when that is impossible."""
    with hub_offline():
        try:
            model: torch.nn.Module = auto_cls.from_pretrained(name, local_files_only=True, dtype=dtype)
        except (OSError, ValueError, KeyError) as exc:
            raise WorkloadConfigError(
                f"params.model = {name!r}: cannot load it without the network ({exc}). Expected a local "
                "directory with config.json and weights, or a hub id already in the local Hugging Face "
                "cache; omit `model` to use the random-init architecture"
            ) from None
    return model


def pretrained_tokenizer(name: str) -> Any | None:
    """The tokenizer shipped with `name`, or None. transformers 5 builds an empty tokenizer (a few
    special tokens) from config.json alone; a vocabulary that small means none was shipped."""
    from transformers import AutoTokenizer

    tokenizer = pretrained_part(AutoTokenizer, name)
    return tokenizer if tokenizer is not None and len(tokenizer) >= MIN_SHIPPED_VOCAB else None


def select_tokenizer(
    kind: str, model: str | None, vocab_size: int, built_in: Callable[[int], Any], built_in_name: str
) -> tuple[Any, str, bool]:
    """(tokenizer, where it came from, whether it is the built-in one): the model's own when it ships one,
    else `built_in(vocab_size)`. A tokenizer with more ids than the model's vocabulary is a config error."""
    tokenizer = pretrained_tokenizer(model) if model else None
    is_built_in = tokenizer is None
    if tokenizer is not None:
        source = f"{type(tokenizer).__name__} from {model}"
    else:
        tokenizer = built_in(vocab_size)
        source = f"built-in {built_in_name} ({len(tokenizer)} ids, no download)"
    if len(tokenizer) > vocab_size:
        raise WorkloadConfigError(
            f"{kind}: the tokenizer has {len(tokenizer)} ids but the model's vocab_size is {vocab_size}; "
            "expected a tokenizer that matches the model"
        )
    return tokenizer, source, is_built_in


def pretrained_part(auto_cls: Any, name: str) -> Any | None:
    """A processor/tokenizer from local files, or None when there is none (the caller falls back)."""
    with hub_offline():
        try:
            return auto_cls.from_pretrained(name, local_files_only=True)
        except (OSError, ValueError, KeyError, TypeError):
            return None
