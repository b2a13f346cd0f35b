"""Real transformers model workloads (random-init architectures by default; local weights with `model:`).

It defines the kinds image-classification, text-classification, embeddings, audio-classification
and text-generation (listed in reference_server/workloads/registry.py). Importing it is cheap: torch
and transformers are imported only when a model workload is built or loaded, so a synthetic-only
server starts fast.

    vision.py            image-classification (ViT)
    text.py              text-classification (BERT-sized) and embeddings (MiniLM-sized)
    audio.py             audio-classification (wav2vec2-sized)
    generation.py        text-generation (GPT-2-sized), streamed token by token
    common.py            what every model workload shares: load once, device/dtype, describe, run_batch
    loading.py           build a model from its transformers config (random init) or local weights
    params.py            the validated `params:` of a model function
    device.py            device, dtype, threads and memory helpers (torch imported lazily)
    pixels.py            image preprocessing as batched tensor operations
    jpeg.py              JPEG bytes decoded as one batch on the model's device (decode: device)
    graphs.py            the forward pass over padded batch-size buckets, as CUDA graphs (cuda_graphs: N)
    phase_clock.py       timing the phases inside a batch call (CUDA events on a GPU)
    local_tokenizers.py  tokenizers trained in-process, so nothing is downloaded
"""

from reference_server.workloads.models import audio, generation, text, vision

__all__ = ["audio", "generation", "text", "vision"]
