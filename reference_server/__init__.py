"""A reference inference server with Gradio's queue, batching and concurrency semantics and wire protocol.

    http/            the HTTP surfaces: Gradio's routes (every emulated release), plain HTTP, OpenAI,
                     admin, /config; the app and what its lifespan builds; front-end processes
    queue/           the event queue: concurrency groups, dispatcher, batching, ETA, sessions, streams,
                     the worker threads a job calls its workload on
    io/              what goes in and out of a function: component formats, uploads, image decoding
    workloads/       synthetic workloads and transformers models behind one interface
    observe/         what the server measures of itself: phase traces, Prometheus metrics, GPU, tokens
    presets/         ready server settings (`--preset NAME`)

    settings.py      ServerSettings: the Gradio queue/launch knobs plus the functions to serve
    auth.py          login and tokens, as a Gradio app launched with `auth=`
    errors.py        errors a workload raises on purpose (gr.Error-like)
    launch.py        options -> ServerSettings -> uvicorn (`python -m reference_server`, `qbench serve`)
    testing.py       serve_in_thread: a real server on a free loopback port, for tests and benches (in this
                     process; in a child process: qbench.tune.servers.server_process)
    selfmeasure.py   a quick self-measure of the queue's overhead

Imports point one way: observe <- workloads <- io <- queue <- http <- launch/testing, with settings,
auth and errors below them all (tests/test_layout.py holds this; the server never imports qbench).
"""

__version__ = "0.1.0"
