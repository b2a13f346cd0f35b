"""OpenAI-compatible completions (`/v1/chat/completions` or `/v1/completions`): the first input is the
prompt; a streamed answer is read chunk by chunk for TTFT, inter-token gaps and token counts."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from qbench.errors import TargetError
from qbench.run.protocols.base import JOURNEY, Clock, SessionState, fail
from qbench.run.protocols.http import refuse
from qbench.run.records import gap_histogram
from qbench.run.records.schema import RequestRecord
from qbench.run.scenario.credentials import refusal_hint
from qbench.run.scenario.schema import Scenario, endpoint_label

CHAT_PATH = "/v1/chat/completions"
REQUEST_ID_HEADER = "X-Request-Id"


def request_id_value(request_id: int) -> str:
    """The X-Request-Id sent for a record (inverse: int(value.removeprefix("qbench-")))."""
    return f"qbench-{request_id}"


class OpenAIProtocol:
    def __init__(self, scenario: Scenario, target: str, http: aiohttp.ClientSession, clock: Clock) -> None:
        ep = scenario.endpoint
        path = ep.path or CHAT_PATH
        self.root = target.rstrip("/")
        self.url = self.root + "/" + path.lstrip("/")
        self.chat = not path.rstrip("/").endswith("/v1/completions")
        self.model = ep.model
        self.max_tokens = ep.max_tokens
        self.stream = ep.stream
        self.extra: dict[str, Any] = dict(ep.body or {})
        self.headers = {"Content-Type": "application/json", **ep.headers}
        self.auth = scenario.auth
        self.http = http
        self.clock = clock
        self.endpoint_label = endpoint_label("openai", ep)  # every record has it: no ?key= value
        self._cache: dict[int, bytes] = {}

    async def discover(self) -> dict[str, Any]:
        """GET /v1/models: the server answers, and serves `endpoint.model` (default: its first model)."""
        try:
            async with self.http.get(self.root + "/v1/models", headers=self.headers) as resp:
                raw = await resp.read()
                status = resp.status
        except (aiohttp.ClientError, OSError) as exc:
            raise TargetError(f"{self.root}: cannot connect ({exc.__class__.__name__}: {exc})") from exc
        if status in (401, 403):
            hint = refusal_hint(status, self.auth)
            raise TargetError(f"{self.root}: GET /v1/models answered HTTP {status}: {hint}")
        models = _model_ids(raw) if status == 200 else []
        if self.model is None:
            if not models:
                raise TargetError(
                    f"{self.root}: GET /v1/models answered {status} with no model: set endpoint.model"
                )
            self.model = models[0]
        elif models and self.model not in models:
            raise TargetError(f"{self.root}: no model '{self.model}'; it serves {', '.join(models)}")
        return {"models": models, "model": self.model, "url": self.url}

    def body(self, inputs: list[Any]) -> bytes:
        """The request body for these inputs, cached per input list."""
        key = id(inputs)
        cached = self._cache.get(key)
        if cached is None:
            cached = orjson.dumps(self.request(inputs))
            self._cache[key] = cached
        return cached

    def request(self, inputs: list[Any]) -> dict[str, Any]:
        first = inputs[0] if inputs else ""
        body: dict[str, Any] = {"model": self.model}
        if isinstance(first, list):  # a generated chat (payload text turns): its messages
            if self.chat:
                body["messages"] = first
            else:
                body["prompt"] = "\n".join(str(m.get("content", "")) for m in first)
        elif self.chat:
            body["messages"] = [{"role": "user", "content": str(first)}]
        else:
            body["prompt"] = str(first)
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        body["stream"] = self.stream
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        body.update(self.extra)
        return body

    async def send(self, record: RequestRecord, inputs: list[Any], slot: int) -> None:
        journey = JOURNEY.get()
        if journey is not None and self.chat:
            await self._turn(record, inputs, journey)
            return
        await self._send(record, self.body(inputs))

    async def _turn(self, record: RequestRecord, inputs: list[Any], journey: SessionState) -> None:
        """One turn of a journey's conversation: the messages and replies so far, then this one."""
        request = self.request(inputs)
        asked = request["messages"]
        request["messages"] = journey.messages + asked
        reply = await self._send(record, orjson.dumps(request))
        if record.ok:
            journey.messages += [*asked, {"role": "assistant", "content": reply}]

    async def _send(self, record: RequestRecord, data: bytes) -> str:
        """Send one request body; the reply's text (what a conversation keeps)."""
        record.bytes_sent = len(data)
        record.sent_at_s = self.clock.now()
        try:
            headers = {**self.headers, REQUEST_ID_HEADER: request_id_value(record.request_id)}
            async with self.http.post(self.url, data=data, headers=headers) as resp:
                record.joined_at_s = self.clock.now()
                record.http_status = resp.status
                if resp.status >= 400:
                    await refuse(record, resp, self.clock)
                    return ""
                if resp.content_type == "text/event-stream":
                    return await self._read_stream(record, resp)
                raw = await resp.read()
                record.bytes_received = len(raw)
                return self._read_whole(record, raw)
        except (aiohttp.ClientError, OSError) as exc:
            kind = "connect" if record.joined_at_s is None else "stream_broken"
            fail(record, kind, f"{exc.__class__.__name__}: {exc}", self.clock.now())
            return ""

    async def _read_stream(self, record: RequestRecord, resp: aiohttp.ClientResponse) -> str:
        stream = TokenStream(self.chat)
        done = False
        async for line in resp.content:
            record.bytes_received += len(line)
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                done = True
                break
            now = self.clock.now()
            error = stream.feed(payload, now)
            if error is not None:
                fail(record, "server_error", error, now)
                return ""
        now = self.clock.now()
        if not done and stream.finish_reason is None:
            message = f"the stream ended after {stream.chunks} chunk(s) without [DONE]"
            fail(record, "stream_broken", message, now)
            return ""
        stream.fill(record)
        record.completed_at_s = now
        record.outcome = "ok"
        return "".join(stream.text)

    def _read_whole(self, record: RequestRecord, raw: bytes) -> str:
        now = self.clock.now()
        try:
            data = orjson.loads(raw)
            choice = data["choices"][0]
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
            fail(record, "server_error", f"not a completion: {raw[:200].decode(errors='replace')}", now)
            return ""
        record.finish_reason = choice.get("finish_reason")
        usage = data.get("usage") or {}
        record.input_tokens = usage.get("prompt_tokens")
        record.output_tokens = usage.get("completion_tokens")
        record.tokens_from = "usage" if record.output_tokens is not None else None
        record.completed_at_s = now
        record.outcome = "ok"
        message = choice.get("message") if isinstance(choice, dict) else None
        return str((message or {}).get("content") or choice.get("text") or "")

    def abandon(self, record: RequestRecord) -> None:
        """Nothing to cancel: closing the connection stops generation on OpenAI-compatible servers."""

    async def close(self) -> None:
        self._cache.clear()


class TokenStream:
    """The chunks of one streamed completion: content chunk times, finish reason, usage."""

    def __init__(self, chat: bool) -> None:
        self.chat = chat
        self.times: list[float] = []
        self.chunks = 0
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.text: list[str] = []  # the reply's pieces (a journey's conversation keeps the reply)

    def feed(self, payload: bytes, now: float) -> str | None:
        """One `data:` payload; an error message for an error chunk or unparsable data, else None."""
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return f"not JSON in the stream: {payload[:200].decode(errors='replace')}"
        if not isinstance(chunk, dict):
            return f"not a chunk: {payload[:200].decode(errors='replace')}"
        if "error" in chunk:
            return str(chunk["error"])[:500]
        self.chunks += 1
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            text = (choice.get("delta") or {}).get("content") if self.chat else choice.get("text")
            if text:
                self.times.append(now)
                self.text.append(str(text))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return None

    def fill(self, record: RequestRecord) -> None:
        """Write first output, outputs, tokens and inter-token statistics onto the record."""
        times = self.times
        record.outputs = len(times)
        record.first_output_at_s = times[0] if times else None
        record.finish_reason = self.finish_reason
        record.input_tokens = self.usage.get("prompt_tokens")
        reported = self.usage.get("completion_tokens")
        record.output_tokens = reported if reported is not None else len(times)
        record.tokens_from = "usage" if reported is not None else "chunks"
        gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False))
        record.itl_count = len(gaps)
        if gaps:
            record.itl_mean_s = sum(gaps) / len(gaps)
            record.itl_p50_s = percentile(gaps, 0.50)
            record.itl_p99_s = percentile(gaps, 0.99)
            record.itl_max_s = gaps[-1]
            record.itl_hist = gap_histogram.encode(gap_histogram.histogram(gaps))


def percentile(ordered: list[float], q: float) -> float:
    """Type-7 (linear) percentile of sorted values, as numpy's default (qbench.run.results.summary)."""
    rank = q * (len(ordered) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def _model_ids(raw: bytes) -> list[str]:
    try:
        data = orjson.loads(raw)
        return [str(m["id"]) for m in data["data"]]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return []
