"""The building blocks of the configuration's models: a strict frozen base and bounded numbers.

Every number has a finite, sane maximum: a value that passes check-config must not crash the daemon
(an interval of inf) or leave it idle for ever (a jitter of 1e300 seconds).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

MINUTE, HOUR, DAY, WEEK = 60.0, 3600.0, 86400.0, 7 * 86400.0

PositiveFloat = Annotated[float, Field(gt=0, le=DAY, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, le=DAY, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=1, le=1_000_000)]
IntervalMinutes = Annotated[float, Field(gt=0, le=WEEK / MINUTE, allow_inf_nan=False)]
Hours = Annotated[float, Field(gt=0, le=24 * 366, allow_inf_nan=False)]
ShortSeconds = Annotated[float, Field(gt=0, le=MINUTE, allow_inf_nan=False)]
HourSeconds = Annotated[float, Field(gt=0, le=HOUR, allow_inf_nan=False)]


class StrictModel(BaseModel):
    """Frozen, no unknown keys, surrounding whitespace stripped from strings."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)


def http_url(value: str) -> str:
    """``value`` if it is an http:// or https:// URL (without its trailing slash), else ValueError."""
    import re

    if not re.match(r"^https?://[^\s/]+", value):
        raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
    return value.rstrip("/")
