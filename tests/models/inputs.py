"""Real inputs for the model tests: images, text, audio clips and WAV files (deterministic)."""

from __future__ import annotations

import wave
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

TINY = {"size": "tiny", "seed": 0}

TEXTS = [
    "The queue was short.",
    "A much longer review: the server batched eight requests, answered all of them, and nobody waited!",
    "ok",
]


def image(width: int, height: int, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


IMAGES = [image(48, 32, 1), image(300, 200, 2), image(17, 90, 3)]


def tone(rate: int, seconds: float, hz: float) -> tuple[int, np.ndarray]:
    t = np.arange(int(rate * seconds), dtype=np.float32) / rate
    return rate, (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


CLIPS = [tone(16000, 1.0, 440.0), tone(44100, 0.5, 220.0), tone(8000, 1.7, 1000.0)]


def write_wav(path: Path, clip: tuple[int, np.ndarray]) -> Path:
    rate, samples = clip
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(samples, -1, 1) * 32767).astype(np.int16).tobytes())
    return path


def confidences(label_value: dict[str, Any]) -> dict[str, float]:
    return {c["label"]: c["confidence"] for c in label_value["confidences"]}
