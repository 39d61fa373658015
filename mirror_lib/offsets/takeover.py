"""Where a flow continues when it takes a partition over from MirrorMaker 2 (pure rules).

MM2's Connect offsets say which upstream record it copied last *and committed*; it goes on
copying for up to ``offset.flush.interval.ms`` (60 s by default) before the next commit, so
the remote partition usually holds more than that. Restarted, MM2 itself would copy those
records again. We find MM2's really last copied record instead: the last record of the remote
partition is looked for upstream, from the committed offset on (it cannot be before: Connect
commits an offset only once its record is written), and the first upstream record equal to it
(key, value, headers and timestamp) is taken. The first, so that identical records can only
make us copy a record twice, never skip one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple


class Content(NamedTuple):
    """What MM2 copies of a record unchanged: key, value, headers and timestamp (ms; None when
    it cannot be compared, e.g. a remote topic with LogAppendTime)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int | None

    def same(self, other: Content) -> bool:
        """Equal as copies: timestamps count only when both are known."""
        stamps = self.timestamp is None or other.timestamp is None
        return (self.key, self.value, self.headers) == (other.key, other.value, other.headers) and (
            stamps or self.timestamp == other.timestamp
        )


@dataclass(frozen=True)
class Boundary:
    """Where the flow continues a partition MM2 replicated.

    ``next_offset``: the first upstream offset we copy. ``matched``: the upstream offset of
    MM2's last copied record (None: not found, we continue after ``committed``, as a restarted
    MM2 would). ``committed``: MM2's committed position (the last record it committed; None: no
    commit). ``remote_last``: the downstream offset of MM2's last record (None: the remote
    partition holds nothing).
    """

    next_offset: int
    matched: int | None
    committed: int | None
    remote_last: int | None

    @property
    def beyond_commit(self) -> int:
        """Upstream offsets MM2 copied after its last commit (a restarted MM2 copies them again;
        we do not)."""
        if self.matched is None:
            return 0
        return self.matched - (self.committed if self.committed is not None else -1)


def find_boundary(
    *,
    committed: int | None,
    remote_last: tuple[int, Content] | None,
    upstream: Iterable[tuple[int, Content]],
    earliest: int,
) -> Boundary | None:
    """The boundary of one partition; None when MM2 left nothing to continue from.

    ``committed``: MM2's committed offset (None: none, or reset). ``remote_last``: the offset
    and content of the remote partition's last record. ``upstream``: the source partition's
    records in offset order from ``committed`` (or ``earliest``) on; read lazily, up to the
    first match. ``earliest``: the source partition's earliest offset.
    """
    if remote_last is None:
        return None if committed is None else Boundary(committed + 1, None, committed, None)
    last_offset, last = remote_last
    start = earliest if committed is None else max(committed, earliest)
    for offset, content in upstream:
        if offset >= start and content.same(last):
            return Boundary(offset + 1, offset, committed, last_offset)
    fallback = earliest if committed is None else committed + 1
    return Boundary(fallback, None, committed, last_offset)
