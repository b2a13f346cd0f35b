"""Synthetic workloads: cheap, deterministic stand-ins for a model with a known cost.

    kind    inputs -> outputs   runs                     cost model
    echo    text|number -> same  event loop                none (queue overhead only); `busy_ms`: that much
                                                           CPU work per call ON the event loop (an `async def`
                                                           doing CPU work: request handling stalls meanwhile)
    sleep   text -> text         event loop (sync: thread) base_ms + per_item_ms * batch_size, with jitter
    cpu     text -> text         thread pool               `repeats` torch matmuls of n x n (real CPU)
    stream  text -> text         event loop (sync: thread) `chunks` outputs, one every interval_ms (generator)
    tokens  text -> text         event loop                a token streamer: first token after ttft_ms, then
                                                           one every interval_ms, `tokens` in all (generator)
    fail    text -> text         event loop                raises with probability `rate` (seeded)
    imageop image -> image,json  thread pool               grayscale + resize to `size` (file in/out path)

Jitter (sleep): `{dist: lognormal, sigma: 0.3, seed: 1}` multiplies the latency by exp(N(0, sigma))
(so the median stays at the nominal latency); `{dist: normal, sigma: 5}` adds N(0, sigma) ms;
`{dist: uniform, sigma: 5}` adds U(-sigma, sigma) ms. Latencies are clipped at 0.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reference_server.errors import UserFacingError
from reference_server.workloads.base import Component, Workload, WorkloadConfigError

TEXT_IN = [Component("text", "text", "hello")]
TEXT_OUT = [Component("text", "output")]


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _parse(model: type[_Params], kind: str, params: dict[str, Any]) -> Any:
    """Validate `params` for `kind`; WorkloadConfigError names key, value and expectation."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise WorkloadConfigError(
            f"workload {kind!r}: params.{key} = {err.get('input')!r}: {err['msg']}"
        ) from None


# ---------------------------------------------------------------- echo
class EchoParams(_Params):
    type: Literal["text", "number"] = "text"
    busy_ms: float = Field(default=0.0, ge=0)  # CPU spun on the event loop per call (per batch)


@dataclass
class Echo(Workload):
    """Returns its input unchanged; measures pure queue and protocol overhead."""

    kind = "echo"
    is_async: bool = True
    busy_s: float = 0.0

    def _spin(self) -> None:
        """Burn `busy_s` of CPU in this thread (the event loop's): nothing else runs there meanwhile."""
        if self.busy_s:
            end = time.thread_time() + self.busy_s
            while time.thread_time() < end:
                pass

    async def arun(self, inputs: list[Any]) -> list[Any]:
        self._spin()
        return [inputs[0]]

    async def arun_batch(self, columns: list[list[Any]]) -> list[list[Any]]:
        self._spin()
        return [list(columns[0])]

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "busy_ms": self.busy_s * 1000}


def make_echo(params: dict[str, Any]) -> Workload:
    p = _parse(EchoParams, "echo", params)
    comp = Component(p.type, p.type, "hello" if p.type == "text" else 3)
    return Echo(inputs=[comp], outputs=[Component(p.type, "output")], busy_s=p.busy_ms / 1000)


# ---------------------------------------------------------------- sleep
class JitterParams(_Params):
    dist: Literal["lognormal", "normal", "uniform"] = "lognormal"
    sigma: float = Field(default=0.0, ge=0)
    seed: int | None = None


class SleepParams(_Params):
    base_ms: float = Field(default=100.0, ge=0)
    per_item_ms: float = Field(default=0.0, ge=0)
    jitter: JitterParams | None = None
    sync: bool = False


@dataclass
class Sleep(Workload):
    """Sleeps `base_ms + per_item_ms * batch_size` (plus jitter), then echoes its input."""

    kind = "sleep"
    params: SleepParams = field(default_factory=SleepParams)
    rng: random.Random = field(default_factory=random.Random)

    def latency_s(self, batch_size: int) -> float:
        nominal = self.params.base_ms + self.params.per_item_ms * batch_size
        j = self.params.jitter
        if j is None or j.sigma == 0:
            return nominal / 1000
        if j.dist == "lognormal":
            ms = nominal * math.exp(self.rng.gauss(0.0, j.sigma))
        elif j.dist == "normal":
            ms = nominal + self.rng.gauss(0.0, j.sigma)
        else:
            ms = nominal + self.rng.uniform(-j.sigma, j.sigma)
        return max(ms, 0.0) / 1000

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.params.model_dump()}

    def run(self, inputs: list[Any]) -> list[Any]:
        time.sleep(self.latency_s(1))
        return [inputs[0]]

    def run_batch(self, columns: list[list[Any]]) -> list[list[Any]]:
        time.sleep(self.latency_s(len(columns[0])))
        return [list(columns[0])]

    async def arun(self, inputs: list[Any]) -> list[Any]:
        await asyncio.sleep(self.latency_s(1))
        return [inputs[0]]

    async def arun_batch(self, columns: list[list[Any]]) -> list[list[Any]]:
        await asyncio.sleep(self.latency_s(len(columns[0])))
        return [list(columns[0])]


def make_sleep(params: dict[str, Any]) -> Workload:
    p = _parse(SleepParams, "sleep", params)
    seed = p.jitter.seed if p.jitter else None
    return Sleep(inputs=TEXT_IN, outputs=TEXT_OUT, is_async=not p.sync, params=p, rng=random.Random(seed))


# ---------------------------------------------------------------- cpu
class CpuParams(_Params):
    n: int = Field(default=256, ge=1, le=8192)
    repeats: int = Field(default=1, ge=1)


@dataclass
class Cpu(Workload):
    """Real CPU work: `repeats` float32 matmuls of n x n (torch), in the server's thread pool."""

    kind = "cpu"
    params: CpuParams = field(default_factory=CpuParams)
    matrix: Any = None

    def load(self, device: str) -> None:
        import torch

        self.matrix = torch.rand(self.params.n, self.params.n, device=device)

    def warmup(self) -> None:
        self.run(["warmup"])

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.params.model_dump()}

    def run(self, inputs: list[Any]) -> list[Any]:
        if self.matrix is None:
            self.load("cpu")
        acc = self.matrix
        for _ in range(self.params.repeats):
            acc = (acc @ self.matrix).clamp_(0.0, 1.0)
        return [f"{inputs[0]} {float(acc[0, 0]):.4f}"]


def make_cpu(params: dict[str, Any]) -> Workload:
    return Cpu(inputs=TEXT_IN, outputs=TEXT_OUT, params=_parse(CpuParams, "cpu", params))


# ---------------------------------------------------------------- stream
class StreamParams(_Params):
    chunks: int = Field(default=10, ge=1)
    interval_ms: float = Field(default=50.0, ge=0)
    sync: bool = False


@dataclass
class Stream(Workload):
    """A generator: yields `chunks` growing texts ("<input>", "<input> 1", ...), one per interval."""

    kind = "stream"
    is_generator: bool = True
    params: StreamParams = field(default_factory=StreamParams)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.params.model_dump()}

    def _texts(self, text: str) -> Iterator[str]:
        out = str(text)
        for i in range(self.params.chunks):
            if i:
                out += f" {i}"
            yield out

    def stream(self, inputs: list[Any]) -> Iterator[list[Any]]:
        for i, text in enumerate(self._texts(inputs[0])):
            if i:
                time.sleep(self.params.interval_ms / 1000)
            yield [text]

    async def astream(self, inputs: list[Any]) -> AsyncIterator[list[Any]]:
        for i, text in enumerate(self._texts(inputs[0])):
            if i:
                await asyncio.sleep(self.params.interval_ms / 1000)
            yield [text]


def make_stream(params: dict[str, Any]) -> Workload:
    p = _parse(StreamParams, "stream", params)
    return Stream(inputs=TEXT_IN, outputs=TEXT_OUT, is_async=not p.sync, params=p)


# ---------------------------------------------------------------- tokens
class TokensParams(_Params):
    tokens: int = Field(default=16, ge=1)
    ttft_ms: float = Field(default=20.0, ge=0)
    interval_ms: float = Field(default=10.0, ge=0)


@dataclass
class Tokens(Workload):
    """A synthetic LLM: after `ttft_ms` (the prefill), the continuation grows by one word ("t0",
    "t0 t1", ...) every `interval_ms`; each yield is the whole continuation so far, like
    text-generation, so one yield is one token for the OpenAI front."""

    kind = "tokens"
    is_generator: bool = True
    params: TokensParams = field(default_factory=TokensParams)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.params.model_dump()}

    async def astream(self, inputs: list[Any]) -> AsyncIterator[list[Any]]:
        p = self.params
        await asyncio.sleep(p.ttft_ms / 1000)
        text = ""
        for i in range(p.tokens):
            if i:
                await asyncio.sleep(p.interval_ms / 1000)
            text = f"{text} t{i}" if i else "t0"
            yield [text]


def make_tokens(params: dict[str, Any]) -> Workload:
    p = _parse(TokensParams, "tokens", params)
    return Tokens(inputs=TEXT_IN, outputs=TEXT_OUT, is_async=True, params=p)


# ---------------------------------------------------------------- fail
class FailParams(_Params):
    rate: float = Field(default=1.0, ge=0, le=1)
    seed: int | None = None
    message: str = "synthetic failure"
    user_visible: bool = False  # raise a gr.Error-like error (always shown to the client)
    title: str = "Error"
    duration: float | None = 10
    base_ms: float = Field(default=0.0, ge=0)


@dataclass
class Fail(Workload):
    """Fails a seeded fraction `rate` of calls (a batch fails as a whole), echoes otherwise."""

    kind = "fail"
    is_async: bool = True
    params: FailParams = field(default_factory=FailParams)
    rng: random.Random = field(default_factory=random.Random)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.params.model_dump()}

    async def _maybe_fail(self) -> None:
        if self.params.base_ms:
            await asyncio.sleep(self.params.base_ms / 1000)
        if self.rng.random() < self.params.rate:
            p = self.params
            if p.user_visible:
                raise UserFacingError(p.message, title=p.title, duration=p.duration)
            raise RuntimeError(p.message)

    async def arun(self, inputs: list[Any]) -> list[Any]:
        await self._maybe_fail()
        return [inputs[0]]

    async def arun_batch(self, columns: list[list[Any]]) -> list[list[Any]]:
        await self._maybe_fail()
        return [list(columns[0])]


def make_fail(params: dict[str, Any]) -> Workload:
    p = _parse(FailParams, "fail", params)
    return Fail(inputs=TEXT_IN, outputs=TEXT_OUT, params=p, rng=random.Random(p.seed))


# ---------------------------------------------------------------- imageop
class ImageOpParams(_Params):
    size: int = Field(default=64, ge=1, le=4096)


@dataclass
class ImageOp(Workload):
    """Image in, image out: grayscale and resize to size x size; also reports the input's size (JSON)."""

    kind = "imageop"
    params: ImageOpParams = field(default_factory=ImageOpParams)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.params.model_dump()}

    def run(self, inputs: list[Any]) -> list[Any]:
        img = inputs[0]
        out = img.convert("L").resize((self.params.size, self.params.size)).convert("RGB")
        return [out, {"width": img.width, "height": img.height}]


def make_imageop(params: dict[str, Any]) -> Workload:
    p = _parse(ImageOpParams, "imageop", params)
    return ImageOp(inputs=[Component("image", "image")],
                   outputs=[Component("image", "output"), Component("json", "size")], params=p)
