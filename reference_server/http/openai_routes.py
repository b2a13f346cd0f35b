"""The OpenAI-compatible front: `/v1/models`, `/v1/chat/completions`, `/v1/completions`.

Every function with one text input and one text output is a model (its api_name is the model id);
a request goes through the same event queue as a Gradio join (same groups, limits, max_size), in a
session of its own. Each generator step is one token (text-generation and the synthetic `tokens`
workload yield the whole continuation so far; the delta is what it added); a plain function
answers in one chunk. `max_tokens` stops the generator after that many steps (finish_reason
"length"). Usage: prompt tokens by the workload's tokenizer when it has one (else words),
completion tokens = steps. A full queue answers 503 with Retry-After; a bad request a 4xx with an
OpenAI error body naming the reason. A client that disconnects mid-stream stops the generator.
Every streamed completion's token times go to the server's token log (reference_server.observe.token_log,
`GET /status/tokens`), keyed by the client's `X-Request-Id`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from reference_server.http.gradio_routes import JSONResponse, state_of
from reference_server.http.server_state import ServerState
from reference_server.observe.token_log import TokenTimeline, now
from reference_server.queue.queue import QueueFullError
from reference_server.queue.runtime import FunctionRuntime

RETRY_AFTER_S = "1"


class OpenAIError(Exception):
    """A 4xx/5xx answered as OpenAI's `{"error": {...}}` body."""

    def __init__(self, status: int, message: str, param: str | None = None, kind: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param
        self.kind = kind or ("invalid_request_error" if status < 500 else "server_error")

    def response(self) -> Response:
        body = {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": None}}
        headers = {"Retry-After": RETRY_AFTER_S} if self.status == 503 else None
        return JSONResponse(body, status_code=self.status, headers=headers)


@dataclass
class Completion:
    """One parsed request."""

    fn: FunctionRuntime
    chat: bool
    prompt: str
    max_tokens: int | None
    stream: bool
    include_usage: bool

    @property
    def model(self) -> str:
        return self.fn.name


def text_models(state: ServerState) -> list[FunctionRuntime]:
    def is_text(fn: FunctionRuntime) -> bool:
        w = fn.workload
        return [c.type for c in w.inputs] == ["text"] and [c.type for c in w.outputs] == ["text"]

    return [fn for fn in state.functions if is_text(fn)]


async def models(request: Request) -> Response:
    created = int(time.time())
    data = [{"id": fn.name, "object": "model", "created": created, "owned_by": "reference_server"}
            for fn in text_models(state_of(request))]
    return JSONResponse({"object": "list", "data": data})


def parse(state: ServerState, body: Any, chat: bool) -> Completion:
    if not isinstance(body, dict):
        raise OpenAIError(400, "the request body must be a JSON object")
    by_name = {fn.name: fn for fn in text_models(state)}
    model = body.get("model")
    if not isinstance(model, str):
        raise OpenAIError(400, "'model' is required (a string)", "model")
    if model not in by_name:
        raise OpenAIError(404, f"the model '{model}' does not exist; served: {', '.join(by_name)}", "model",
                          "not_found_error")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)
                                   or max_tokens < 1):
        raise OpenAIError(400, f"'max_tokens' must be an integer >= 1, got {max_tokens!r}", "max_tokens")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise OpenAIError(400, "'stream_options' must be an object", "stream_options")
    return Completion(by_name[model], chat, _prompt(body, chat), max_tokens, bool(body.get("stream")),
                      bool(options.get("include_usage")))


def _prompt(body: dict[str, Any], chat: bool) -> str:
    if not chat:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt:
            raise OpenAIError(400, "'prompt' must be a non-empty string", "prompt")
        return prompt
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise OpenAIError(400, "'messages' must be a non-empty list", "messages")
    texts = []
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):  # content parts: keep the text ones
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise OpenAIError(400, f"messages[{i}].content must be a string", f"messages[{i}].content")
        texts.append(content)
    return "\n".join(texts)


def prompt_tokens(fn: FunctionRuntime, prompt: str) -> int:
    count = getattr(fn.workload, "count_tokens", None)
    return int(count(prompt)) if callable(count) else len(prompt.split())


def admit(state: ServerState, req: Completion, session: str) -> None:
    """Open the request's session and push its event (a full queue raises a 503 OpenAIError)."""
    state.queue.sessions.open(session)
    try:
        state.queue.push(session, req.fn, [req.prompt], simple_format=True)
    except QueueFullError as exc:
        state.queue.sessions.drop(session)
        raise OpenAIError(503, str(exc), kind="queue_full") from None


async def tokens(state: ServerState, req: Completion, session: str) -> AsyncIterator[str | dict[str, Any]]:
    """The admitted request's text deltas; a dict last: {"finish_reason", "steps"} or {"error", "steps"}."""
    found = state.queue.sessions.get(session)
    if found is None:
        yield {"error": "the session was evicted", "steps": 0}
        return
    mailbox = found.queue
    text, steps = "", 0
    while True:
        msg = await mailbox.get()
        kind = msg["msg"]
        if kind == "process_generating" or (kind == "process_completed" and msg["success"] and not steps):
            new = str(msg["output"]["data"][0] or "")
            delta = new[len(text):] if new.startswith(text) else new
            text, steps = new, steps + 1
            yield delta
            if req.max_tokens is not None and steps >= req.max_tokens and kind != "process_completed":
                yield {"finish_reason": "length", "steps": steps}
                return
        if kind == "process_completed":
            if not msg["success"]:
                output = msg.get("output") or {}
                reason = output.get("error") or msg.get("title") or "the job failed"
                yield {"error": str(reason), "steps": steps}
            else:
                yield {"finish_reason": "stop", "steps": steps}
            return
        if kind in ("unexpected_error", "cancelled"):
            yield {"error": str(msg.get("message") or kind), "steps": steps}
            return


class CompletionCall:
    """One request's answer, streamed or whole."""

    def __init__(self, state: ServerState, req: Completion) -> None:
        self.state, self.req = state, req
        self.session = f"openai-{uuid.uuid4().hex}"
        self.id = ("chatcmpl-" if req.chat else "cmpl-") + uuid.uuid4().hex[:24]
        self.created = int(time.time())
        self.object = "chat.completion" if req.chat else "text_completion"
        self.timeline: TokenTimeline | None = None  # set for streamed answers (the token log)

    def usage(self, steps: int) -> dict[str, int]:
        prompt = prompt_tokens(self.req.fn, self.req.prompt)
        return {"prompt_tokens": prompt, "completion_tokens": steps, "total_tokens": prompt + steps}

    def chunk(self, delta: str | None, finish: str | None, role: bool = False) -> dict[str, Any]:
        if self.req.chat:
            piece: dict[str, Any] = {"delta": ({"role": "assistant", "content": ""} if role else
                                                {} if delta is None else {"content": delta})}
        else:
            piece = {"text": delta or "", "logprobs": None}
        choice = {"index": 0, **piece, "finish_reason": finish}
        return {"id": self.id, "object": self.object + ("" if not self.req.chat else ".chunk"),
                "created": self.created, "model": self.req.model, "choices": [choice]}

    async def whole(self) -> Response:
        parts: list[str] = []
        admit(self.state, self.req, self.session)
        try:
            async for item in tokens(self.state, self.req, self.session):
                if isinstance(item, str):
                    parts.append(item)
                    continue
                if "error" in item:
                    raise OpenAIError(500, item["error"])
                text = "".join(parts)
                piece: dict[str, Any] = ({"message": {"role": "assistant", "content": text}} if self.req.chat
                                         else {"text": text, "logprobs": None})
                choice = {"index": 0, **piece, "finish_reason": item["finish_reason"]}
                return JSONResponse({"id": self.id, "object": self.object, "created": self.created,
                                     "model": self.req.model, "choices": [choice],
                                     "usage": self.usage(item["steps"])})
        finally:
            self.state.queue.disconnect(self.session)
        raise OpenAIError(500, "the job ended without a result")

    async def frames(self) -> AsyncIterator[bytes]:
        """The SSE body of an admitted request."""
        source = tokens(self.state, self.req, self.session)
        try:
            if self.req.chat:
                yield _frame(self.chunk(None, None, role=True))
            item = await anext(source, None)
            while item is not None:
                if isinstance(item, str):
                    if self.timeline is not None and item:
                        self.timeline.token_at_s.append(now())
                    yield _frame(self.chunk(item, None))
                elif "error" in item:
                    yield _frame({"error": {"message": item["error"], "type": "server_error", "param": None,
                                            "code": None}})
                    return
                else:
                    if self.timeline is not None:
                        self.timeline.finish_reason = item["finish_reason"]
                    yield _frame(self.chunk(None, item["finish_reason"]))
                    if self.req.include_usage:
                        usage = self.chunk(None, None)
                        usage.update(choices=[], usage=self.usage(item["steps"]))
                        yield _frame(usage)
                    yield b"data: [DONE]\n\n"
                    return
                item = await anext(source, None)
        finally:
            self.state.queue.disconnect(self.session)  # stops the generator if the client went away


class SessionStreamingResponse(StreamingResponse):
    """A streamed answer that always leaves the queue when it ends, even when the client went away
    before the body generator started (its own `finally` would then never run)."""

    def __init__(self, call: CompletionCall) -> None:
        super().__init__(call.frames(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        self.call = call

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.call.state.queue.disconnect(self.call.session)


def _frame(data: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


async def _complete(request: Request, chat: bool) -> Response:
    received_at = now()
    state = state_of(request)
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError as exc:
        return OpenAIError(400, f"the request body is not valid JSON: {exc}").response()
    try:
        req = parse(state, body, chat)
        call = CompletionCall(state, req)
        if not req.stream:
            return await call.whole()
        admit(state, req, call.session)
    except OpenAIError as exc:
        return exc.response()
    call.timeline = state.tokens.start(request.headers.get("x-request-id"), call.id, received_at)
    return SessionStreamingResponse(call)


async def chat_completions(request: Request) -> Response:
    return await _complete(request, chat=True)


async def completions(request: Request) -> Response:
    return await _complete(request, chat=False)


ROUTES = [
    Route("/v1/models", models, methods=["GET"]),
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    Route("/v1/completions", completions, methods=["POST"]),
]
