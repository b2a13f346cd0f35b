"""What the target is, and a scenario drafted from its own API (`qbench init`).

    draft.py          `qbench init`: the target read (Gradio, OpenAI, MCP, plain HTTP) -> a scenario
    draft_yaml.py     the commented YAML it writes
    openapi_body.py   a plain HTTP server's request body from its OpenAPI schema
    frameworks.py     which framework serves a plain HTTP target (LitServe, Ray Serve, BentoML, TorchServe...)

Design: docs/design/records-and-results.md.
"""
