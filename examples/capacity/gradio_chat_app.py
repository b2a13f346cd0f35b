"""A Gradio chat app as people write it: gr.ChatInterface, a streamed reply of ~130 ms, four at a time.

    python examples/capacity/gradio_chat_app.py --port 7860 &
    qbench capacity examples/capacity/gradio_chat.yaml --target http://127.0.0.1:7860

`--max-size N` caps Gradio's queue (`demo.queue(max_size=N)`), as `qbench capacity` may advise.
`--keep-history`: the app keeps every session's conversation and, before each reply, looks through all
of them for the question most like this one (a chat "memory" written the simple way): each reply costs
a little more than the one before, so the app ages with use.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

import gradio as gr

WORDS = "Thanks for asking. Here is my answer to that".split()
CONVERSATIONS: dict[str, list[frozenset[str]]] = {}  # --keep-history: every session's messages, kept for good


def reply(message: str, history: list[dict[str, str]]) -> Iterator[str]:
    text = ""
    for word in WORDS:  # 10 words, 13 ms each: ~130 ms of "model" per reply
        time.sleep(0.013)
        text += word + " "
        yield text


def remembering_reply(message: str, history: list[dict[str, str]], request: gr.Request) -> Iterator[str]:
    """`reply`, after looking through every message kept so far for the one most like this one (the share
    of words they have in common: about a microsecond a message kept, so each reply costs a little more
    than the last)."""
    asked = frozenset(message.lower().split())
    # the sessions as they are now: another reply (four run at once) may add one while this one looks
    kept = (m for conversation in list(CONVERSATIONS.values()) for m in conversation)
    closest = max((len(asked & m) / len(asked | m) for m in kept), default=0.0)
    CONVERSATIONS.setdefault(request.session_hash or "", []).append(asked)
    text = "(you asked me that before) " if closest > 0.95 else ""
    for part in reply(message, history):
        yield text + part


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--max-size", type=int, default=None)
    parser.add_argument("--keep-history", action="store_true", help="keep every session's messages, "
                        "and look through them all before each reply (the app ages with use)")
    args = parser.parse_args()
    # the remembering reply under the plain one's API name: the same scenario drives both
    demo = (gr.ChatInterface(remembering_reply, api_name="reply") if args.keep_history
            else gr.ChatInterface(reply))
    demo.queue(default_concurrency_limit=4, max_size=args.max_size)
    demo.launch(server_name="127.0.0.1", server_port=args.port)


if __name__ == "__main__":
    main()
