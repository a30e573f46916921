"""The audit's settings: inconsistent thresholds and malformed hosts are refused on construction, and
URLs are checked only where asked."""

from __future__ import annotations

import pytest

from dreamer.hermes.audit.settings import AuditSettings, InvalidAuditSettingsError


class TestValidation:
    def test_settings_validation(self) -> None:
        """Inconsistent thresholds are refused with the setting named."""
        with pytest.raises(InvalidAuditSettingsError, match="skip_below_pct"):
            AuditSettings(skip_below_pct=90, threshold_pct=85)


class TestSettings:
    def test_default_sends_no_request(self) -> None:
        """AuditSettings() lists no host, so `checks_urls` is false."""
        assert AuditSettings().verify_hosts == () and not AuditSettings().checks_urls

    def test_a_dry_run_checks_only_when_asked(self) -> None:
        """A listed host and a dry run: no checks unless verify_urls."""
        assert not AuditSettings(verify_hosts=("nas01.lan",), dry_run=True).checks_urls
        assert AuditSettings(verify_hosts=("nas01.lan",), dry_run=True, verify_urls=True).checks_urls
        assert AuditSettings(verify_hosts=("nas01.lan",)).checks_urls

    def test_a_malformed_host_is_refused(self) -> None:
        """A URL given as a host names the setting and what to give instead."""
        with pytest.raises(InvalidAuditSettingsError, match=r"verify_hosts: 'http://nas01.lan' is a URL"):
            AuditSettings(verify_hosts=("http://nas01.lan",))
