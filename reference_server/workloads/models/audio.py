"""`audio-classification`: a wav2vec2-base-sized encoder with a classification head.

Preprocessing: mono float32 samples are resampled to the feature extractor's rate (16 kHz) with a
Lanczos (windowed-sinc, anti-aliased) filter, clipped to `max_seconds`, then normalised to zero mean
and unit variance per clip. The random-init model uses a layer-norm feature encoder (as in
wav2vec2-large-lv60) so a padded batch is masked and gives the same answer as one clip at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reference_server.workloads.base import Component, WorkloadInputError
from reference_server.workloads.models.common import ModelWorkload, label_config, label_values
from reference_server.workloads.models.loading import build_config, pretrained_part, random_model
from reference_server.workloads.models.params import CommonParams, LabelParams, ParamReader

if TYPE_CHECKING:
    import numpy as np
    import torch

MIN_SECONDS = 0.1  # shorter clips are zero-padded (the conv feature encoder needs ~25 ms at least)


@dataclass(frozen=True)
class Clip:
    """Samples already resampled, clipped and checked by `prepare` (in the request's worker thread)."""

    samples: np.ndarray


class AudioClassification(ModelWorkload):
    kind = "audio-classification"
    family = "wav2vec2"
    prepares_rows = True  # resampling runs per request, on worker threads in parallel

    def __init__(self, common: CommonParams, labels: LabelParams, max_seconds: float) -> None:
        super().__init__(common, [Component("audio", "audio")], [Component("label", "label")])
        self.labels = labels
        self.max_seconds = max_seconds
        self._extractor: Any = None

    def random_model(self) -> torch.nn.Module:
        from transformers import Wav2Vec2Config, Wav2Vec2ForSequenceClassification

        config = build_config(
            Wav2Vec2Config, self.family, self.common.size, self.common.config, label_config(self.labels)
        )
        return random_model(Wav2Vec2ForSequenceClassification, config, self.common.seed)

    def auto_class(self) -> Any:
        from transformers import AutoModelForAudioClassification

        return AutoModelForAudioClassification

    def load_preprocessor(self) -> None:
        from transformers import AutoFeatureExtractor, Wav2Vec2FeatureExtractor

        if self.common.model is not None:
            self._extractor = pretrained_part(AutoFeatureExtractor, self.common.model)
            if self._extractor is not None:
                self.preprocessor_source = f"{type(self._extractor).__name__} from {self.common.model}"
                return
        self._extractor = Wav2Vec2FeatureExtractor(  # type: ignore[no-untyped-call]
            feature_size=1,
            sampling_rate=16000,
            padding_value=0.0,
            do_normalize=True,
            return_attention_mask=True,
        )
        self.preprocessor_source = "Wav2Vec2FeatureExtractor (16 kHz, Lanczos resampling, normalised)"

    @property
    def sampling_rate(self) -> int:
        return int(self._extractor.sampling_rate)

    def warmup_inputs(self) -> list[Any]:
        import numpy as np

        t = np.arange(44100, dtype=np.float32) / 44100
        return [(44100, (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32))]

    def run_batch(self, columns: list[list[Any]]) -> list[list[Any]]:
        import torch

        clips = [v.samples if isinstance(v, Clip) else self.prepare(v) for v in columns[0]]
        features = self._extractor(clips, sampling_rate=self.sampling_rate, padding=True, return_tensors="pt")
        with torch.inference_mode():
            logits = self.model(**self.model_inputs(features)).logits
        return [label_values(logits, self.config.id2label, self.labels.top_k)]

    def prepare_row(self, inputs: list[Any]) -> list[Any]:
        """A usable clip -> Clip; a bad one is left for run_batch, so it fails the whole batch (as in
        Gradio, and as before this step moved to the request threads)."""
        try:
            return [Clip(self.prepare(inputs[0]))]
        except WorkloadInputError:
            return inputs

    def prepare(self, value: Any) -> np.ndarray:
        """(sample_rate, samples) -> mono float32 at the model's rate, within [MIN, max] seconds."""
        import numpy as np

        rate, samples = _unpack(value)
        if samples.ndim == 2:
            samples = samples.mean(axis=1 if samples.shape[1] <= 8 else 0)
        if samples.ndim != 1 or samples.size == 0:
            raise WorkloadInputError(
                f"audio input: expected a non-empty mono or stereo clip, got samples of shape {samples.shape}"
            )
        if not np.isfinite(samples).all():
            raise WorkloadInputError("audio input: samples contain NaN or infinity")
        samples = resample(samples[: int(self.max_seconds * rate) or 1], rate, self.sampling_rate)
        shortfall = int(MIN_SECONDS * self.sampling_rate) - samples.size
        return np.pad(samples, (0, shortfall)) if shortfall > 0 else samples


def _unpack(value: Any) -> tuple[int, np.ndarray]:
    import numpy as np

    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise WorkloadInputError(f"audio input: expected (sample_rate, samples), got {type(value).__name__}")
    rate, samples = value
    if isinstance(rate, bool) or not isinstance(rate, (int, np.integer)) or rate <= 0:
        raise WorkloadInputError(f"audio input: sample rate {rate!r} is not a positive integer")
    array = np.asarray(samples)
    if array.dtype.kind == "i":  # PCM integers -> [-1, 1)
        array = array / float(np.iinfo(array.dtype).max + 1)
    elif array.dtype.kind != "f":
        raise WorkloadInputError(f"audio input: samples of dtype {array.dtype} are not audio")
    return int(rate), array.astype(np.float32)


def resample(samples: np.ndarray, rate: int, target: int) -> np.ndarray:
    """Lanczos-3 resampling (Pillow's anti-aliased resize of a 1-row float image)."""
    import numpy as np
    from PIL import Image

    if rate == target:
        return samples
    length = max(1, round(samples.size * target / rate))
    row = Image.fromarray(samples.reshape(1, -1).astype(np.float32))
    return np.asarray(row.resize((length, 1), Image.Resampling.LANCZOS), dtype=np.float32).reshape(-1)


def audio_classification(params: dict[str, Any]) -> AudioClassification:
    """params: common keys + top_k (5), num_labels (12, keyword-spotting-sized), labels, max_seconds (10)."""
    reader = ParamReader("audio-classification", params)
    workload = AudioClassification(
        reader.common(), reader.labels(default_count=12), reader.number("max_seconds", 10.0, 0.1)
    )
    reader.finish()
    return workload
