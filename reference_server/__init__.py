"""A reference inference server with Gradio's queue, batching and concurrency semantics and wire protocol.

    settings.py      ServerSettings: the Gradio queue/launch knobs plus the functions to serve
    launch.py        options -> ServerSettings -> uvicorn (`python -m reference_server`, `qbench serve`)
    testing.py       serve_in_thread: a real server on a free loopback port, for tests and benches (in this
                     process; in a child process: qbench.tune.server_process)
    app.py           build_app(settings) -> Starlette, one front a module:
    gradio_routes.py   Gradio's HTTP API under /gradio_api (plus /config)
    gradio3_routes.py  the routes of each emulated release, and Gradio 3.x's websocket
    gradio3.py         Gradio 3.50's queue: its estimations, data gathering at dispatch, messages
    http_routes.py     the plain HTTP front (`POST /predict/{api_name}`)
    openai_routes.py   the OpenAI-compatible front; token_log.py its own per-token timestamps
    admin.py         /metrics, /status, /healthz and the live reconfiguration (/admin/config)
    auth.py          login and tokens, as a Gradio app launched with `auth=`
    api_config.py    what /config and /info say about the served functions
    components.py    component wire formats and (pre|post)processing
    uploads.py       `POST /gradio_api/upload` off the event loop
    server_state.py  what the lifespan builds once: workloads, queue, files, metrics
    queue.py         the event queue: concurrency groups, dispatcher, batching, ETA, cancel
    runtime.py       the queue's data: functions, events, jobs, concurrency groups
    jobs.py          running one dispatched job: preprocess, call the workload, postprocess
    decode_pool.py   upload parsing and image decoding in worker processes
    front_ends.py    HTTP front-end processes before the one queue (launch.front_ends)
    profiling.py     per-event phase traces in Gradio's shape (/gradio_api/profiling/...)
    sessions.py      per-session message queues and pending events (the SSE stream)
    streams.py       the SSE responses: /queue/data, /call/..., /heartbeat
    messages.py      sse_v3 messages and the streaming diff
    errors.py        errors a workload raises on purpose (gr.Error-like)
    metrics.py       Prometheus metrics of the queue; gpu.py GPU telemetry through NVML
    selfmeasure.py   a quick self-measure of the queue's overhead
    workloads/       synthetic workloads and transformers models behind one interface
"""

__version__ = "0.1.0"
