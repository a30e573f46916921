"""The words of a refused configuration: each pydantic validation error turned into one line
``<file>: <key path>: <what is wrong and what is allowed>``.

Pydantic's own messages name its internals (``extra_forbidden``, ``literal_error``, a location
tuple); an operator needs the key as written in the TOML and the fix, so every kind of error a
config file can make is spelled here, once.
"""

from __future__ import annotations

from pydantic import ValidationError

__all__ = ["CrossReferenceError", "format_validation_error"]


class CrossReferenceError(ValueError):
    """The problems across tables (:mod:`.checks`), raised from a validator so pydantic carries
    them out, each still naming its own key path (pydantic would name only the whole model)."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{k}: {m}" for k, m in problems))


def _loc_to_key(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def format_validation_error(exc: ValidationError, source: str) -> list[str]:
    """One line per problem of ``exc`` in the file ``source``, in pydantic's order; the problems
    across tables each get their own line, as if pydantic had found them one by one."""
    lines: list[str] = []
    for err in exc.errors():
        ctx_error = (err.get("ctx") or {}).get("error")
        if isinstance(ctx_error, CrossReferenceError):
            lines.extend(f"{source}: {k}: {m}" for k, m in ctx_error.problems)
            continue
        loc = tuple(err["loc"])
        if loc and loc[-1] == "[key]":
            # An invalid table name (a bank, profile or agent alias), reported on its parent table.
            parent = _loc_to_key(loc[:-2])
            lines.append(
                f"{source}: {parent}: {str(loc[-2])!r} is not a valid name (use lowercase letters, "
                "digits, '_' and '-', starting with a letter)"
            )
            continue
        key = _loc_to_key(loc)
        kind = err["type"]
        if kind == "extra_forbidden":
            parent = _loc_to_key(tuple(err["loc"][:-1]))
            where = f"[{parent}]" if err["loc"][:-1] else "the top level"
            msg = f"unknown key (not allowed in {where}; check the spelling against config.example.toml)"
        elif kind == "literal_error":
            expected = (err.get("ctx") or {}).get("expected", "")
            msg = f"got {err.get('input')!r}; allowed: {expected}"
        elif kind == "string_pattern_mismatch":
            msg = (
                f"{err.get('input')!r} is not a valid name "
                f"(must match {(err.get('ctx') or {}).get('pattern')})"
            )
        elif kind == "missing":
            msg = "required key is missing"
        elif kind in ("model_type", "dict_type"):
            msg = f"must be a table ([{key}]), got {err.get('input')!r}"
        elif kind == "value_error":
            msg = str(err["msg"]).removeprefix("Value error, ")
        else:
            msg = f"{err['msg']} (got {err.get('input')!r})"
        lines.append(f"{source}: {key}: {msg}")
    return lines
