"""Wire protocols, one module per wire family; `registry.make_protocol` is the one list of them.

    base.py             the WireProtocol interface; the HTTP session from the scenario's limits; error kinds
    registry.py         make_protocol: the scenario's `protocol` -> its WireProtocol
    gradio.py           Gradio apps of every release: discovery, inputs and uploads; the wire is the family's
    gradio_api.py       a Gradio app's public API (/info, /config) -> endpoints and their inputs (qbench init)
    gradio_values.py    each component's value in the wire format of the app's release (Dataframe, Gallery...)
    gradio_schema.py    a gradio.Server app's @server.api parameters -> values of their JSON-schema types
    gradio_wire.py      what every Gradio wire family shares: GradioApp, the QueueWire interface, messages
    gradio_families.py  make_wire: the app's family (GET /config `protocol`) -> its QueueWire; make_chunk_wire
    gradio_3x_ws.py     family `ws` (Gradio 3.x): a websocket per request
    gradio_4_0_sse.py   family `sse` (Gradio 4.0-4.8): each request's own stream is its queue join
    gradio_4_9_sse.py   families sse_v1..sse_v3 (Gradio 4.9 onwards): one stream per session
    gradio_stream.py    streamed inputs into a .stream() event (5.0 onwards): sse_v3's wire plus chunks
    login.py            credentials on the wire: Gradio's login; headers and cookies on every request
    http.py             plain request/response with a JSON body template; streamed bodies read as they arrive
    http1.py            a minimal HTTP/1.1 client for the plain-HTTP hot path
    server_timing.py    a plain HTTP answer's Server-Timing header: its queue wait and service, server clock
    openai.py           OpenAI-compatible completions: TTFT, inter-token gaps, token counts
    mcp.py              MCP tool calls over Streamable HTTP (an app's mcp_server=True tools)
    page.py             a page load as a browser makes it: the HTML, its assets, the app's /config and info"""
