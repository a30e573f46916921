"""``[state]``: where Dreamer keeps its own state (docs/design/leases.md).

``backend = "sqlite"`` (the default) is the file ``<state_dir>/state.sqlite3``; ``"postgres"`` is a
schema of a PostgreSQL database, which several hosts can share: each profile is then rolled up by
the one host that holds its lease. The password is never in the TOML nor in ``dsn``: it comes from
``password_env`` or ``password_file`` (a systemd credential), or from libpq's own passfile.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from dreamer.config.fields import StrictModel

__all__ = ["StateConfig"]

# A password in a libpq connection string: "user:secret@" in a URI, or password=... in key=value form.
_URI_PASSWORD = re.compile(r"^postgres(?:ql)?://[^/@?#]*:[^/@?#]*@", re.IGNORECASE)
_KEY_PASSWORD = re.compile(r"(?:^|\s|[?&])password\s*=", re.IGNORECASE)


class StateConfig(StrictModel):
    """The state backend, and for PostgreSQL how to reach it and how hosts share its profiles.

    ``lease_ttl_s`` is how long a host's hold on a profile lasts without a heartbeat: a host that
    dies is replaced that long after its last one. The heartbeat renews every ``lease_ttl_s / 3``.
    ``host_id`` names this host in the leases (default: the host name and the process id).
    """

    backend: Literal["sqlite", "postgres"] = "sqlite"
    dsn: Annotated[str, Field(max_length=2000)] | None = None
    schema_name: Annotated[str, Field(alias="schema")] = "dreamer"
    password_env: str | None = None
    password_file: Path | None = None
    pool_size: Annotated[int, Field(ge=1, le=64)] = 4
    lease_ttl_s: Annotated[float, Field(ge=3, le=3600, allow_inf_nan=False)] = 60.0
    host_id: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    # Resolved from password_env / password_file at load time; never accepted from the file.
    password: SecretStr | None = Field(default=None, exclude=True)

    @field_validator("dsn")
    @classmethod
    def _no_password(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if _URI_PASSWORD.search(value) or _KEY_PASSWORD.search(value):
            # Not echoed: the string holds a password, and this message is printed and logged.
            raise ValueError(
                "holds a password; remove it from the connection string and put it in "
                "password_env or password_file (or libpq's ~/.pgpass), so it is never printed or logged"
            )
        if any(not ch.isprintable() for ch in value):
            raise ValueError("holds a control character; write the connection string on one line")
        return value

    @field_validator("schema_name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", value):
            raise ValueError(
                f"must be a plain PostgreSQL schema name (lower-case letters, digits and '_', at most "
                f"63, not starting with a digit), got {value!r}"
            )
        return value

    @field_validator("host_id")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        if value is not None and any(not ch.isprintable() for ch in value):
            raise ValueError("holds a control character; name the host in plain text")
        return value

    @model_validator(mode="after")
    def _postgres_needs_dsn(self) -> StateConfig:
        if self.backend == "postgres" and not self.dsn:
            raise ValueError(
                "backend 'postgres' needs state.dsn, a libpq connection string without the password "
                "(e.g. postgresql://dreamer@db.example:5432/dreamer)"
            )
        return self
