"""Errors a workload may raise on purpose (gr.Error-like), shown to the client whatever show_error says."""

from __future__ import annotations


class UserFacingError(Exception):
    """Like `gr.Error`: always reaches the client as `{"error", "duration", "visible", "title"}`."""

    user_visible = True

    def __init__(self, message: str, title: str = "Error", duration: float | None = 10, visible: bool = True):
        super().__init__(message)
        self.message = message
        self.title = title
        self.duration = duration
        self.visible = visible
