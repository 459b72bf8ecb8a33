"""The hypothesis profiles: "ci" for `make test` (the default), "deep" for `make test-full`.

A property runs the profile's number of examples (100, or 3000 under "deep"), or, where an
example costs much (a template compiled, a whole catalog entry streamed), a count of its
own, written `examples(count)`: that count under "ci", DEEP_FACTOR times it under "deep",
so that `make test-full` goes deeper on those properties too.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
DEEP_FACTOR = 10

settings.register_profile(
    "ci",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.register_profile(
    "deep", max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(PROFILE)


def examples(count: int) -> int:
    """A property's own example count under the loaded profile."""
    return count * DEEP_FACTOR if PROFILE == "deep" else count
