"""The HTTP surfaces: one module a front, over the one queue.

    app.py             build_app(settings) -> Starlette, the routes of every front
    server_state.py    what the lifespan builds once: workloads, queue, files, metrics
    gradio_routes.py   Gradio's HTTP API under /gradio_api (plus /config)
    gradio3_routes.py  the routes of each emulated release, and Gradio 3.x's websocket
    http_routes.py     the plain HTTP front (`POST /predict/{api_name}`)
    openai_routes.py   the OpenAI-compatible front
    admin.py           /metrics, /status, /healthz and the live reconfiguration (/admin/config)
    api_config.py      what /config and /info say about the served functions
    front_ends.py      HTTP front-end processes before the one queue (launch.front_ends)
    arena.py           uploads' decoded images in memory a front end shares with the core
"""
