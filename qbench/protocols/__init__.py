"""Wire protocols: `base` (the WireProtocol interface, the HTTP session from the scenario's limits),
`gradio` (queue join + uploads + cancel) with `sse` (one SSE reader per session), and `http`
(plain request/response with a JSON body template)."""
