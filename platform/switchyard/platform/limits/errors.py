"""The one error of the limiters: they cannot decide, because their Redis is unreachable."""

from __future__ import annotations

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["REDIS_UNREACHABLE", "LimitsUnavailable"]

REDIS_UNREACHABLE = (RedisConnectionError, RedisTimeoutError)
"""The Redis client's errors that mean "Redis is unreachable" (refused, timed out, loading), not a bad command."""


class LimitsUnavailable(Exception):
    """A limiter could not reach its Redis, so it can neither admit nor refuse.

    The gateway answers 503 with ``retry-after``; agent runs wait and try again within their time limit.
    """
