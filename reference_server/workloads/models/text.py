"""`text-classification` (BERT-base-sized) and `embeddings` (MiniLM-sized, mean pooled) on text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reference_server.workloads.base import Component, WorkloadInputError
from reference_server.workloads.models.common import ModelWorkload, label_config, label_values
from reference_server.workloads.models.loading import build_config, random_model, select_tokenizer
from reference_server.workloads.models.local_tokenizers import wordpiece_tokenizer
from reference_server.workloads.models.params import CommonParams, LabelParams, ParamReader

if TYPE_CHECKING:
    import torch

EXAMPLE_TEXT = "The queue was short and the answer came back quickly."


class TextEncoderWorkload(ModelWorkload):
    """A BERT-style encoder with a tokenizer; batches are padded to the longest text (attention mask)."""

    def __init__(self, common: CommonParams, max_length: int, outputs: list[Component]) -> None:
        super().__init__(common, [Component("text", "text", example=EXAMPLE_TEXT)], outputs)
        self.max_length = max_length
        self._tokenizer: Any = None

    def load_preprocessor(self) -> None:
        vocab_size = int(self.config.vocab_size)
        self._tokenizer, self.preprocessor_source, _ = select_tokenizer(
            self.kind, self.common.model, vocab_size, wordpiece_tokenizer, "WordPiece tokenizer"
        )

    def warmup_inputs(self) -> list[Any]:
        return [EXAMPLE_TEXT]

    def encode(self, texts: list[Any]) -> dict[str, torch.Tensor]:
        """Tokenise a batch: pad to the longest, truncate to max_length (and the model's positions)."""
        for text in texts:
            if not isinstance(text, str) or not text.strip():
                raise WorkloadInputError(f"text input: expected non-empty text, got {text!r:.40}")
        limit = min(self.max_length, int(getattr(self.config, "max_position_embeddings", self.max_length)))
        with self.prep_lock:
            batch = self._tokenizer(
                texts, padding=True, truncation=True, max_length=limit, return_tensors="pt"
            )
        return self.model_inputs(batch)


class TextClassification(TextEncoderWorkload):
    kind = "text-classification"
    family = "bert"

    def __init__(self, common: CommonParams, labels: LabelParams, max_length: int) -> None:
        super().__init__(common, max_length, [Component("label", "label")])
        self.labels = labels

    def random_model(self) -> torch.nn.Module:
        from transformers import BertConfig, BertForSequenceClassification

        config = build_config(
            BertConfig, self.family, self.common.size, self.common.config, label_config(self.labels)
        )
        return random_model(BertForSequenceClassification, config, self.common.seed)

    def auto_class(self) -> Any:
        from transformers import AutoModelForSequenceClassification

        return AutoModelForSequenceClassification

    def run_batch(self, columns: list[list[Any]]) -> list[list[Any]]:
        import torch

        inputs = self.encode(columns[0])
        with torch.inference_mode():
            logits = self.model(**inputs).logits
        return [label_values(logits, self.config.id2label, self.labels.top_k)]


class Embeddings(TextEncoderWorkload):
    """Sentence embeddings: the encoder's last hidden states mean pooled over real (unpadded) tokens."""

    kind = "embeddings"
    family = "minilm"

    def __init__(self, common: CommonParams, max_length: int, normalize: bool) -> None:
        super().__init__(common, max_length, [Component("json", "embedding")])
        self.normalize = normalize

    def random_model(self) -> torch.nn.Module:
        from transformers import BertConfig, BertModel

        config = build_config(BertConfig, self.family, self.common.size, self.common.config)
        return random_model(BertModel, config, self.common.seed)

    def auto_class(self) -> Any:
        from transformers import AutoModel

        return AutoModel

    def run_batch(self, columns: list[list[Any]]) -> list[list[Any]]:
        import torch

        inputs = self.encode(columns[0])
        with torch.inference_mode():
            hidden = self.model(**inputs).last_hidden_state.float()
            mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
            if self.normalize:
                pooled = torch.nn.functional.normalize(pooled, dim=-1)
        return [pooled.cpu().tolist()]


def text_classification(params: dict[str, Any]) -> TextClassification:
    """params: common keys + top_k (5), num_labels (2), labels, max_length (128 tokens)."""
    reader = ParamReader("text-classification", params)
    workload = TextClassification(
        reader.common(), reader.labels(default_count=2), reader.integer("max_length", 128, 2)
    )
    reader.finish()
    return workload


def embeddings(params: dict[str, Any]) -> Embeddings:
    """params: common keys + max_length (128 tokens), normalize (true: unit-length vectors)."""
    reader = ParamReader("embeddings", params)
    common = reader.common()
    workload = Embeddings(common, reader.integer("max_length", 128, 2), reader.flag("normalize", True))
    reader.finish()
    return workload
