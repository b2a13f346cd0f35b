"""A chat whose history lives in the session, as a Gradio ChatInterface keeps it in a gr.State.

    kind          inputs -> outputs   runs         cost model
    session_chat  text -> text        event loop   base_ms + per_exchange_ms * exchanges so far

Each call is one exchange of the caller's session (its session_hash: `SESSION`, set by the server for
the call): the reply names how many exchanges came before, and the cost grows with them, as a prompt
that carries the whole history does. Sessions beyond `max_sessions` forget their history, the least
recently used first (Gradio keeps at most 2000 sessions' state too). `describe()` (in /status) counts
the calls by the history length they saw, so a test can tell whether a user's turns reached the
server as one session.
"""

from __future__ import annotations

import asyncio
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reference_server.workloads.base import SESSION, Component, Workload, WorkloadConfigError


class SessionChatParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    base_ms: float = Field(default=20.0, ge=0)
    per_exchange_ms: float = Field(default=10.0, ge=0)
    max_sessions: int = Field(default=2000, ge=1)


@dataclass
class SessionChat(Workload):
    """Replies after `base_ms + per_exchange_ms * exchanges`; the history is the session's."""

    kind = "session_chat"
    is_async: bool = True
    params: SessionChatParams = field(default_factory=SessionChatParams)
    histories: OrderedDict[str, int] = field(default_factory=OrderedDict)  # session -> exchanges so far
    seen: Counter[int] = field(default_factory=Counter)  # calls by the exchanges they saw

    async def arun(self, inputs: list[Any]) -> list[Any]:
        session = SESSION.get()
        exchanges = self.histories.get(session, 0) if session is not None else 0
        self.seen[exchanges] += 1
        await asyncio.sleep((self.params.base_ms + self.params.per_exchange_ms * exchanges) / 1000)
        if session is not None:
            self.histories[session] = exchanges + 1
            self.histories.move_to_end(session)
            while len(self.histories) > self.params.max_sessions:
                self.histories.popitem(last=False)
        return [f"reply to {str(inputs[0])[:40]!r} after {exchanges} exchange(s)"]

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "sessions": len(self.histories),
                "calls_by_history": {str(k): v for k, v in sorted(self.seen.items())}}


def make_session_chat(params: dict[str, Any]) -> Workload:
    try:
        p = SessionChatParams.model_validate(params)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(x) for x in err["loc"])
        raise WorkloadConfigError(f"workload 'session_chat': params.{key} = {err.get('input')!r}: "
                                  f"{err['msg']}") from None
    return SessionChat(inputs=[Component("text", "message", "hello")], outputs=[Component("text", "reply")],
                       params=p)
