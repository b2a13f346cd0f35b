"""Every workload kind and its factory, listed here (a server config's `workload:` names the kind).

    build_workload(kind, params)   the workload; an unknown kind or bad params raise WorkloadConfigError
    known_kinds()                  the kind names, sorted

The workload modules define factories and import only `base`; this module imports them (the arrows
point one way: registry -> workload modules -> base). Model workloads import torch lazily, inside load().
"""

from __future__ import annotations

from typing import Any, Final

import reference_server.workloads.ideal as ideal
import reference_server.workloads.models.audio as audio
import reference_server.workloads.models.generation as generation
import reference_server.workloads.models.text as text
import reference_server.workloads.models.vision as vision
import reference_server.workloads.session_chat as session_chat
import reference_server.workloads.synthetic as synthetic
from reference_server.workloads.base import Workload, WorkloadConfigError, WorkloadFactory

WORKLOADS: Final[dict[str, WorkloadFactory]] = {
    "echo": synthetic.make_echo,
    "sleep": synthetic.make_sleep,
    "cpu": synthetic.make_cpu,
    "stream": synthetic.make_stream,
    "tokens": synthetic.make_tokens,
    "fail": synthetic.make_fail,
    "imageop": synthetic.make_imageop,
    "session_chat": session_chat.make_session_chat,
    "image-ideal": ideal.image_ideal,
    "image-classification": vision.image_classification,
    "text-classification": text.text_classification,
    "embeddings": text.embeddings,
    "audio-classification": audio.audio_classification,
    "text-generation": generation.text_generation,
}


def known_kinds() -> list[str]:
    return sorted(WORKLOADS)


def build_workload(kind: str, params: dict[str, Any] | None = None) -> Workload:
    """Build a workload by kind name; unknown kinds and bad params raise WorkloadConfigError."""
    if kind not in WORKLOADS:
        raise WorkloadConfigError(f"unknown workload {kind!r}; expected one of: {', '.join(known_kinds())}")
    return WORKLOADS[kind](dict(params or {}))
