"""The URLs in memory text the audit may check: trailing punctuation dropped, each listed once."""

from __future__ import annotations

from dreamer.hermes.audit.probe import extract_urls


class TestExtractUrls:
    def test_url_extraction(self) -> None:
        """URLs lose trailing punctuation and are listed once."""
        text = "API http://127.0.0.1:8/v1, docs (https://example.test/a). again http://127.0.0.1:8/v1"
        assert extract_urls(text) == ("http://127.0.0.1:8/v1", "https://example.test/a")
