"""The control planes a client may talk to: one URL, or several (a primary and its standbys).

Every client (`Client`, the token commands, the supervisor) takes one URL, a list of
them, or a comma-separated string such as `STATEOUS_URL` holds. Requests go to the
URL that answered last. When it cannot be reached, or answers `not_serving` (a
standby, or a control plane that lost its database), the client moves on to the
next one in the list, and keeps to whichever answers. The connections of one
client share one `Urls`, so a move made by one is a move for all of them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from urllib.parse import urlsplit

from stateous.client.errors import BadSetting

#: The environment variable that names the control planes of the token commands.
URL_VARIABLE = "STATEOUS_URL"
#: What a value with no URL in it is told.
NONE_GIVEN = "name at least one control plane's URL"


def is_http(url: str) -> bool:
    """Tell whether `url` is an http:// or https:// URL with a host."""
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def split_urls(value: str | Sequence[str]) -> tuple[str, ...]:
    """The URLs of a comma-separated string or of a list, each without its trailing `/`;
    raise `BadSetting` for no URL or one that is not http:// or https://."""
    items = value.split(",") if isinstance(value, str) else list(value)
    if not any(isinstance(item, str) and item.strip() for item in items):
        raise BadSetting(NONE_GIVEN)
    urls = []
    for item in items:
        url = item.strip() if isinstance(item, str) else item
        if not isinstance(url, str) or not is_http(url):
            raise BadSetting(f"{url!r} is not an http:// or https:// URL")
        urls.append(url.rstrip("/"))
    return tuple(urls)


class Urls:
    """The URLs of the control planes, and which one requests go to now; thread-safe."""

    def __init__(self, urls: str | Sequence[str]) -> None:
        self.all = split_urls(urls)
        self._at = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.all)

    @property
    def current(self) -> str:
        """The URL that requests go to: the first, else the one that answered last."""
        return self.all[self._at]

    def move_from(self, url: str) -> None:
        """Go on to the URL after `url`, unless another connection moved on from it already."""
        with self._lock:
            if self.all[self._at] == url:
                self._at = (self._at + 1) % len(self.all)
