"""Real transformers model workloads (random-init architectures by default; local weights with `model:`).

Importing this package registers the kinds image-classification, text-classification, embeddings,
audio-classification and text-generation. It is cheap: torch and transformers are imported only
when a model workload is built or loaded, so a synthetic-only server starts fast.
"""

from reference_server.workloads.models import audio, generation, text, vision

__all__ = ["audio", "generation", "text", "vision"]
