"""The building blocks of the configuration's models: a strict frozen base and bounded numbers.

Every number has a finite, sane maximum: a value that passes check-config must not crash the daemon
(an interval of inf) or leave it idle for ever (a jitter of 1e300 seconds).
"""

from __future__ import annotations

import ipaddress
import re
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
    if not re.match(r"^https?://[^\s/]+", value):
        raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
    if "@" in value.split("://", 1)[1].split("/", 1)[0]:
        # Not echoed: the part before '@' is a password, and this message is printed and logged.
        raise ValueError(
            "holds a user name or password (user:password@host); put the key in api_key_env or "
            "api_key_file instead, so it is never printed or logged with the URL"
        )
    return value.rstrip("/")


#: Entries of ``audit.verify_hosts``: a host name or address, with an optional port.
_HOST_ENTRY = re.compile(
    r"^(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)\.?)(?::(?P<port>[0-9]{1,5}))?$"
)
_HOST_EXAMPLES = "e.g. 'nas01.lan', '127.0.0.1:8080' or '[::1]:8080'"


def verify_host(value: str) -> tuple[str, int | None]:
    """An ``audit.verify_hosts`` entry as ``(host, port)``: the host lower-cased (an IPv6 address
    without brackets, compressed), the port None when the entry names none (any port); ValueError
    naming what is wrong otherwise."""
    text = value.strip()
    match = _HOST_ENTRY.match(text)
    if match is None:
        if "*" in text:
            why = "has a wildcard; list each host"
        elif "://" in text or "/" in text or "?" in text or "@" in text:
            why = "is a URL, not a host; give the host alone, without scheme, user, path or query"
        else:
            why = "is not a host name or address with an optional :port"
        raise ValueError(f"{text!r} {why} ({_HOST_EXAMPLES})")
    port = int(match["port"]) if match["port"] else None
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"{text!r} has a port outside 1-65535")
    if match["ip6"] is not None:
        try:
            address = ipaddress.IPv6Address(match["ip6"])
        except ValueError:
            raise ValueError(f"{text!r} holds {match['ip6']!r}, which is not an IPv6 address") from None
        return address.compressed, port
    return match["name"].lower(), port
