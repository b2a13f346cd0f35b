"""What every model workload shares: loading once, device/dtype, describe(), labels, run via run_batch.

Thread safety: the server may run several calls of one workload at once (concurrency_limit > 1) on
one model instance. Forward passes under `torch.inference_mode()` do not mutate the model, so they
share it safely. Fast tokenizers are not re-entrant (padding/truncation settings mutate the Rust
object: "Already borrowed"), so tokenization holds `self.prep_lock`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import reference_server.workloads.models.device as dev
from reference_server.workloads.base import Component, Workload
from reference_server.workloads.models.loading import pretrained_model
from reference_server.workloads.models.params import CommonParams, LabelParams

if TYPE_CHECKING:
    import torch


class ModelWorkload(Workload):
    """A transformers model behind the Workload interface; subclasses build the model and the
    preprocessor and implement run_batch (one forward pass per batch)."""

    family = "abstract"  # key of loading.SIZE_PRESETS

    def __init__(
        self,
        common: CommonParams,
        inputs: list[Component],
        outputs: list[Component],
        is_generator: bool = False,
    ) -> None:
        super().__init__(inputs=inputs, outputs=outputs, is_generator=is_generator)
        self.common = common
        self.prep_lock = threading.Lock()
        self.preprocessor_source = "not loaded"
        self._model: torch.nn.Module | None = None
        self._device: torch.device | None = None
        self._dtype: torch.dtype | None = None

    # ---- subclass hooks
    def random_model(self) -> torch.nn.Module:
        """The architecture from its config with random weights (params: size, config, seed)."""
        raise NotImplementedError

    def auto_class(self) -> Any:
        """The transformers Auto* class that loads `params.model`."""
        raise NotImplementedError

    def load_preprocessor(self) -> None:
        """Build the tokenizer / image processor / feature extractor (after the model is loaded)."""
        raise NotImplementedError

    def warmup_inputs(self) -> list[Any]:
        """One representative input row for warmup()."""
        raise NotImplementedError

    # ---- Workload interface
    def load(self, device: str) -> None:
        dev.apply_threads(self.common.threads)
        self._device = dev.resolve_device(device)
        self._dtype = dev.resolve_dtype(self.common.dtype, self._device)
        if self.common.model is None:
            model = self.random_model()
        else:
            model = pretrained_model(self.auto_class(), self.common.model, self._dtype)
        self._model = model.to(device=self._device, dtype=self._dtype).eval()
        if self.common.compile:
            self._model = dev.compiled(self._model, self.common.compile_backend)
        self.load_preprocessor()

    def warmup(self) -> None:
        """One call; with `compile`, a batch of two as well, so serving starts with the dynamic-shape graph
        (torch.compile specialises sizes 0 and 1, and recompiles once on the first batch of another size)."""
        row = self.warmup_inputs()
        self.run(row)
        if self.common.compile and not self.is_generator:
            self.run_batch([[value, value] for value in row])

    def run(self, inputs: list[Any]) -> list[Any]:
        return [column[0] for column in self.run_batch([[value] for value in inputs])]

    def describe(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"kind": self.kind, "loaded": self._model is not None}
        if self._model is None or self._device is None:
            return facts
        config = getattr(self._model, "config", None)
        facts.update(
            model=self.common.model or f"random-init {self.family} ({self.common.size})",
            weights="pretrained" if self.common.model else "random init (no download; real compute cost)",
            architecture=type(getattr(self._model, "_orig_mod", self._model)).__name__,
            model_type=getattr(config, "model_type", None),
            parameters=dev.parameter_count(self._model),
            device=str(self._device),
            dtype=str(self._dtype).removeprefix("torch."),
            **({"dtype_setting": "auto"} if self.common.dtype == "auto" else {}),
            compiled=self.common.compile,
            **({"compile_backend": self.common.compile_backend} if self.common.compile else {}),
            threads=dev.thread_count(),
            preprocessor=self.preprocessor_source,
            **dev.cuda_memory(self._device),
        )
        return facts

    # ---- helpers for subclasses
    @property
    def model(self) -> torch.nn.Module:
        if self._model is None:
            raise RuntimeError(f"{self.kind}: load() must run before the model is used")
        return self._model

    @property
    def device(self) -> torch.device:
        if self._device is None:
            raise RuntimeError(f"{self.kind}: load() must run before the model is used")
        return self._device

    @property
    def dtype(self) -> torch.dtype:
        if self._dtype is None:
            raise RuntimeError(f"{self.kind}: load() must run before the model is used")
        return self._dtype

    @property
    def config(self) -> Any:
        return self.model.config

    def model_inputs(self, batch: Any) -> dict[str, torch.Tensor]:
        """A preprocessor output moved to the model's device and dtype."""
        assert self._device is not None and self._dtype is not None
        return dev.to_model_inputs(batch, self._device, self._dtype)


def label_config(labels: LabelParams) -> dict[str, Any]:
    """Config kwargs for a random-init classifier head."""
    extra: dict[str, Any] = {"num_labels": labels.label_count()}
    names = labels.id2label()
    if names:
        extra["id2label"] = names
        extra["label2id"] = {name: i for i, name in names.items()}
    return extra


def label_values(logits: torch.Tensor, id2label: dict[int, str], top_k: int) -> list[dict[str, Any]]:
    """Per-row Gradio Label values: top label plus the top-k softmax confidences, best first."""
    probs = logits.float().softmax(dim=-1)
    values, indices = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
    rows = []
    for row_values, row_indices in zip(values.tolist(), indices.tolist(), strict=True):
        names = [id2label.get(i, f"LABEL_{i}") for i in row_indices]
        confidences = [{"label": n, "confidence": v} for n, v in zip(names, row_values, strict=True)]
        rows.append({"label": names[0], "confidences": confidences})
    return rows
