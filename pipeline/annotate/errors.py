"""The one exception of the annotation server: a request refused, with its HTTP status.

The store, the old-article lookup, the API and the HTTP layer all raise it; the HTTP layer
(:mod:`pipeline.annotate.server`) turns it into a ``{"error": ...}`` answer. It has a module of
its own so that none of them imports another just for it.
"""

from __future__ import annotations

from http import HTTPStatus


class ApiError(Exception):
    """A request the API refuses: HTTP status plus a message for the JSON body."""

    def __init__(self, status: HTTPStatus, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
