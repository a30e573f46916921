"""The embedded store as the multi-host daemon tests use it: one new unit per profile bank (a
distinct backup time each, so no two are one fact), and the cards in the global bank."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.config import Config


def retain_each(config: Config, profiles: Sequence[str], tag: str) -> dict[str, str]:
    """One new unit in every profile's bank; the text of each, by profile."""
    texts = {
        p: f"Host {p}-{tag} runs backup job {tag} nightly at 02:{i:02d}." for i, p in enumerate(profiles)
    }

    async def write() -> None:
        backend = EmbeddedBackend(config.embedded_path)
        try:
            for p, text in texts.items():
                await backend.retain(config.profile_bank_id(p), [RetainItem(content=text)])
        finally:
            await backend.aclose()

    asyncio.run(write())
    return texts


def upstream_texts(config: Config) -> list[str]:
    """Every unit of the global bank, in order."""

    async def read() -> list[str]:
        backend = EmbeddedBackend(config.embedded_path)
        try:
            return [u.text for u in await backend.list_units_since(config.bank_id("global"), None)]
        finally:
            await backend.aclose()

    return asyncio.run(read())
