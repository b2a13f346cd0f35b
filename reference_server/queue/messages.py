"""Server -> client messages of Gradio's sse_v3 protocol, and the streaming diff.

Messages are plain dicts whose keys come in Gradio's order (`msg`, `event_id`, then the fields of the
message type); every field is present, nulls included. `frame` turns one into an SSE `data:` line.
"""

from __future__ import annotations

from typing import Any

import orjson

Message = dict[str, Any]

HEARTBEAT: Message = {"msg": "heartbeat", "event_id": None}
CLOSE_STREAM: Message = {"msg": "close_stream", "event_id": None}


def frame(msg: Message) -> bytes:
    """One SSE frame: `data: <compact JSON>` and a blank line."""
    return b"data: " + orjson.dumps(msg) + b"\n\n"


def estimation(event_id: str | None, rank: int | None, queue_size: int, rank_eta: float | None) -> Message:
    return {"msg": "estimation", "event_id": event_id, "rank": rank, "queue_size": queue_size,
            "rank_eta": rank_eta}


def process_starts(event_id: str, eta: float | None) -> Message:
    return {"msg": "process_starts", "event_id": event_id, "eta": eta}


def output_body(data: list[Any], is_generating: bool | None, duration: float | None,
                average_duration: float | None) -> dict[str, Any]:
    """`output` of a successful process_generating / process_completed."""
    return {"data": data, "is_generating": is_generating, "duration": duration,
            "average_duration": average_duration, "render_config": None, "changed_state_ids": [],
            "used_cache": None}


def process_generating(event_id: str, output: dict[str, Any]) -> Message:
    return {"msg": "process_generating", "event_id": event_id, "output": output, "success": True,
            "time_limit": None}


def process_completed(event_id: str, output: dict[str, Any], success: bool,
                      title: str | None = None) -> Message:
    """Final message. cache_duration/avg_time copy output.duration/average_duration (Gradio 6.12+)."""
    return {"msg": "process_completed", "event_id": event_id, "output": output, "success": success,
            "title": title, "used_cache": None, "cache_duration": output.get("duration"),
            "avg_time": output.get("average_duration")}


def failed(event_id: str, output: dict[str, Any], title: str | None, later_step: bool = False) -> Message:
    """A failed job. Gradio sets cache_duration/avg_time only for errors on a later generator step
    (where cache_duration then holds the error's display duration), and title only on the first step."""
    msg = process_completed(event_id, output, False, None if later_step else title)
    if not later_step:
        msg["cache_duration"] = None
        msg["avg_time"] = None
    return msg


def cancelled(event_id: str) -> Message:
    """What a cancelled waiting event receives: an empty successful completion."""
    return process_completed(event_id, {}, True)


def unexpected_error(message: str, session_not_found: bool = False) -> Message:
    return {"msg": "unexpected_error", "event_id": None, "message": message,
            "session_not_found": session_not_found, "success": False}


def error_payload(exc: BaseException, show_error: bool) -> tuple[dict[str, Any], str]:
    """(output, title) for a failed job, as Gradio's `error_payload`.

    Exceptions with a `user_visible` attribute (gr.Error-like) are always shown with their title and
    duration; others show `str(exc)` only if show_error, else `{"error": null}`.
    """
    if getattr(exc, "user_visible", False):
        title = str(getattr(exc, "title", "Error"))
        return ({"error": str(getattr(exc, "message", exc)), "duration": getattr(exc, "duration", 10),
                 "visible": getattr(exc, "visible", True), "title": title}, title)
    if show_error:
        return {"error": str(exc), "visible": True}, "Error"
    return {"error": None}, "Error"


Edit = list[Any]  # [action, path, value]


def diff(old: Any, new: Any) -> list[Edit]:
    """Edits turning `old` into `new` (Gradio's sse_v2+ streaming diff).

    Same edits as `gradio.utils.diff`, except for one Gradio bug: Gradio shifts the indices of *nested*
    list deletes a second time at the parent level ([[1, 2, 3]] -> [[1]] gives deletes at [0, 1] and
    [0, 0], which clients apply as [[3]]); here each list's deletes are shifted once, so they apply right.
    """
    edits: list[Edit] = []
    _diff(old, new, [], edits)
    return edits


def _diff(old: Any, new: Any, path: list[Any], edits: list[Edit]) -> None:
    if old == new:
        return
    if type(old) is not type(new):
        edits.append(["replace", path, new])
    elif isinstance(old, str) and new.startswith(old):
        edits.append(["append", path, new[len(old):]])
    elif isinstance(old, list):
        _diff_list(old, new, path, edits)
    elif isinstance(old, dict):
        _diff_dict(old, new, path, edits)
    else:
        edits.append(["replace", path, new])


def _diff_list(old: list[Any], new: list[Any], path: list[Any], edits: list[Edit]) -> None:
    common = min(len(old), len(new))
    for i in range(common):
        _diff(old[i], new[i], [*path, i], edits)
    # Removed tail items: each delete shifts the later ones down, so all of them hit index `common`.
    for _ in range(common, len(old)):
        edits.append(["delete", [*path, common], None])
    for i in range(common, len(new)):
        edits.append(["add", [*path, i], new[i]])


def _diff_dict(old: dict[Any, Any], new: dict[Any, Any], path: list[Any], edits: list[Edit]) -> None:
    for key in old:
        if key in new:
            _diff(old[key], new[key], [*path, key], edits)
        else:
            edits.append(["delete", [*path, key], None])
    for key in new:
        if key not in old:
            edits.append(["add", [*path, key], new[key]])


def apply_diff(value: Any, edits: list[Edit]) -> Any:
    """Inverse of `diff`, as the clients apply it (used by tests and the reference client)."""
    for action, path, item in edits:
        if not path:
            value = item if action == "replace" else value + item if action == "append" else value
            continue
        target = value
        for key in path[:-1]:
            target = target[key]
        key = path[-1]
        if action == "replace":
            target[key] = item
        elif action == "append":
            target[key] += item
        elif action == "add":
            if isinstance(target, list):
                target.insert(key, item)
            else:
                target[key] = item
        elif action == "delete":
            del target[key]
    return value
