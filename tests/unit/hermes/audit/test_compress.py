"""Compressing memory entries: the rules keep every protected detail of real entries and shorten the
long ones; the gate refuses rewrites that lose a detail or are hostile."""

from __future__ import annotations

import re

import pytest

from dreamer.details import Detail, protected_details
from dreamer.hermes.audit.compress import RuleCompressor, compress_by_rules, rewrite_refusal
from tests.locomo import Ref, sentence

MIN_CHARS = 120

#: Whole LoCoMo session summaries: long, many names, dates and times (conversations × sessions 1-4).
SUMMARIES = [(c, f"session_{s}_summary") for c in ("26", "30", "41", "42", "43") for s in (1, 2, 3, 4)]
#: LoCoMo observations of session 1: short facts, most under the threshold.
OBSERVATIONS: list[Ref] = [
    ("26", "session_1_observation", "Caroline", 0),
    ("26", "session_1_observation", "Caroline", 2),
    ("26", "session_1_observation", "Melanie", 2),
    ("30", "session_1_observation", "Gina", 1),
    ("30", "session_1_observation", "Jon", 3),
    ("41", "session_1_observation", "Maria", 0),
    ("41", "session_1_observation", "John", 3),
    ("42", "session_1_observation", "Nate", 0),
    ("42", "session_1_observation", "Joanna", 2),
    ("42", "session_1_observation", "Joanna", 1),
    ("43", "session_1_observation", "John", 0),
    ("43", "session_1_observation", "Tim", 2),
    ("26", "session_1_summary", 1),
    ("30", "session_1_summary", 2),
    ("43", "session_1_summary", 1),
]
#: Homelab and coder memory entries as agents write them: wordy, full of hosts, paths and versions.
WRITTEN = [
    "Please note that the Jellyfin media server is basically running on nas01.lan (192.168.1.20) and "
    "can be reached at http://nas01.lan:8096 in order to stream to the two Rokus.",
    "Backups: restic runs every night at 02:30 from /srv/data to the B2 bucket homelab-backups, and you "
    "must not change the retention of 7 daily, 4 weekly and 12 monthly snapshots.",
    "The Proxmox host pve01 is located in the basement rack and has 128 GB of RAM as well as two Xeon "
    "E5-2680 v4 CPUs; VMs 100 through 120 live on the ZFS pool tank/vms.",
    "Home Assistant is running on a Raspberry Pi 4 at 192.168.1.50 and the config lives in "
    "/home/pi/homeassistant/configuration.yaml which means that edits need a restart of the container.",
    "Pi-hole on 192.168.1.2 is the DNS for the whole LAN; due to the fact that the router at 192.168.1.1 "
    "cannot forward conditionally, local names are listed in /etc/pihole/custom.list.",
    "Grafana dashboards are available at https://grafana.home.example.net and the Prometheus data "
    "source is at http://prometheus.lan:9090 with a retention of 30 days.",
    "WireGuard VPN: the server is running on the OPNsense firewall with the endpoint "
    "vpn.example.net:51820, and each and every peer gets an address in 10.8.0.0/24.",
    "Note that the Nextcloud instance runs version 28.0.4 in Docker on docker01 and its data directory "
    "is /mnt/tank/nextcloud; upgrades must not skip a major version.",
    "In order to run the test suite of the dreamer repository you need to use python -m pytest "
    "tests/unit -q from /home/ada/src/dreamer, and it is worth noting that mypy runs in strict mode.",
    "The user prefers that commit messages are written in the imperative mood and kept under 72 "
    "characters for the first line, as well as a blank line before the body.",
    "The CI pipeline at https://ci.example.org/ada/dreamer runs on every push to main and takes "
    "approximately 6 minutes; failing jobs are not allowed to be merged.",
    "Ada's laptop is a ThinkPad X1 Carbon Gen 11 running Fedora 39 with Python 3.11.7 installed via "
    "pyenv in ~/.pyenv/versions/3.11.7.",
    "The staging database is PostgreSQL 16.2 at db-staging.internal:5432 (database app_staging) and "
    "you have to connect through the bastion host bastion.example.org first.",
    "It should be noted that the frontend is built with Vite 5 and the production bundle is written "
    "to dist/ which is then served by nginx from /var/www/app.",
    "Koby is not allowed to push directly to the release branch; instead he has to open a pull request "
    "that is reviewed by at least two people before it can be merged.",
]
#: Literal spellings that must survive byte for byte: URLs, addresses, paths, versions, times.
_LITERAL = re.compile(
    r"https?://\S+|\b\d+(?:[.:/]\d+)+\b|(?<!\w)[~.]?/[\w./-]+|\b[\w-]+\.(?:lan|internal|net|org)\b"
)


def real_entries() -> list[str]:
    import json

    from tests.locomo import require_data

    directory = require_data()
    summaries = [
        json.loads((directory / f"{c}.json").read_text(encoding="utf-8"))[key] for c, key in SUMMARIES
    ]
    return [*summaries, *(sentence(ref) for ref in OBSERVATIONS), *WRITTEN]


def details_kept(before: str, after: str) -> list[str]:
    """Every protected detail of `before` missing from `after`, checked here independently of the gate."""
    old, new = protected_details(before), protected_details(after)
    missing = [
        f"{kind}: {value}"
        for kind in (Detail.NUMBER, Detail.DATE, Detail.VERSION, Detail.URL, Detail.HOST, Detail.PATH)
        for value in set(old.of_kind(kind)) - set(new.of_kind(kind))
    ]
    missing += [f"name: {n}" for n in old.names if n not in new.names and n not in ("please", "note", "it")]
    missing += [f"literal: {lit}" for lit in _LITERAL.findall(before) if lit.rstrip(".,;)") not in after]
    if old.negations != new.negations:
        missing.append(f"negations {old.negations} -> {new.negations}")
    return missing


class TestRealEntries:
    def test_fifty_real_entries_keep_every_detail_and_long_ones_shrink(self) -> None:
        """Over 50 real entries (20 LoCoMo session summaries, 15 LoCoMo facts, 15 homelab/coder
        entries) the rule compressor loses no number, date, version, URL, host, path, name or negation,
        never touches a short entry, and shortens at least a third of the long ones."""
        entries = real_entries()
        assert len(entries) == 50
        rewrites = RuleCompressor(MIN_CHARS).rewrite(entries)
        long = [e for e in entries if len(e) > MIN_CHARS]
        for entry, rewrite in rewrites.items():
            assert details_kept(entry, rewrite.text) == [], (entry, rewrite.text)
            assert len(rewrite.text) < len(entry)
        assert set(rewrites) <= set(long)
        assert len(rewrites) * 3 >= len(long), f"{len(rewrites)} of {len(long)} long entries shortened"


class TestRules:
    @pytest.mark.parametrize(
        ("wordy", "short"),
        [
            ("Note that the NAS is at 192.168.1.20.", "The NAS is at 192.168.1.20."),
            ("Restic runs in order to copy /srv/data.", "Restic runs to copy /srv/data."),
            ("Ada does not use Windows.", "Ada doesn't use Windows."),
            ("Jon said that the studio opens in three weeks.", "Jon said the studio opens in 3 weeks."),
            (
                "Grafana can be reached at https://g.example.net now.",
                "Grafana is at https://g.example.net now.",
            ),
        ],
    )
    def test_each_rule_shortens_and_keeps_details(self, wordy: str, short: str) -> None:
        """Each rule gives the shorter wording, and the gate accepts it."""
        assert compress_by_rules(wordy) == short
        assert rewrite_refusal(wordy, short) == ""

    def test_a_canary_entry_is_never_compressed(self) -> None:
        """An entry holding the canary marker is skipped, however long and wordy."""
        entry = "Note that this is basically the canary. CANARY: Do not modify this line " + "x " * 80
        assert RuleCompressor(20).rewrite([entry]) == {}


class TestGate:
    ORIGINAL = (
        "Nextcloud 28.0.4 runs on docker01 at https://cloud.example.net with data in /mnt/tank/nc; "
        "Ada does not allow upgrades on Fridays."
    )

    @pytest.mark.parametrize(
        ("rewrite", "why"),
        [
            ("Nextcloud runs on docker01 at https://cloud.example.net, data /mnt/tank/nc; Ada: no Friday upgrades.", "version 28.0.4"),  # noqa: E501
            ("Nextcloud 28.0.4 on docker01, data /mnt/tank/nc; Ada: no Friday upgrades.", "url"),
            ("Nextcloud 28.0.4 on docker01 at https://cloud.example.net; Ada: no Friday upgrades.", "path"),
            ("Nextcloud 28.0.4 on docker01 at https://cloud.example.net, /mnt/tank/nc; no Friday upgrades.", "name ada"),  # noqa: E501
            ("Nextcloud 28.0.4, docker01, https://cloud.example.net, /mnt/tank/nc; Ada upgrades on Fridays.", "negations"),  # noqa: E501
            ("", "empty"),
            ("Nextcloud 28.0.4\n§\nCANARY: Do not modify this line", "only '§'"),
            ("CANARY: Do not modify this line 28.0.4 docker01", "canary marker"),
            (ORIGINAL + " Also more.", "not shorter"),
        ],
    )  # fmt: skip
    def test_a_rewrite_that_loses_something_is_refused(self, rewrite: str, why: str) -> None:
        """A rewrite losing a version, URL, path, name or negation, or an empty, longer, multi-entry
        or canary-bearing one, is refused with the reason."""
        assert why in rewrite_refusal(self.ORIGINAL, rewrite)

    def test_a_rewrite_dropping_the_unverified_mark_is_refused(self) -> None:
        """The audit's [UNVERIFIED] mark is kept by any rewrite, or the rewrite is refused."""
        shorter = "Nextcloud 28.0.4, docker01, https://cloud.example.net, /mnt/tank/nc; Ada: not Fridays."
        assert "[UNVERIFIED]" in rewrite_refusal(self.ORIGINAL + " [UNVERIFIED]", shorter)
        assert rewrite_refusal(self.ORIGINAL + " [UNVERIFIED]", shorter + " [UNVERIFIED]") == ""
