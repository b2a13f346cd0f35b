"""What the server measures of itself.

    profiling.py  per-event phase traces in Gradio's shape (/gradio_api/profiling/...)
    metrics.py    Prometheus metrics of the queue
    gpu.py        GPU telemetry through NVML
    token_log.py  the OpenAI front's own per-token timestamps
"""
