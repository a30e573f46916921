"""The roll-up pipeline: from a profile bank's new units to deduplicated cards in the global bank.

`pipeline` runs the steps and is the only module here that does I/O. The rest are pure (plain
values in and out): `gate` (run or skip), `activity` (one activity snapshot per cycle), `salience`
(which new units matter), `cards` (the reflect request and its answer), `extractive` (cards without
a language model), `details`, `similarity` and `dedup` (duplicate / conflict / new verdicts),
`promote` (what a promoted card carries) and `report` (what a run did). Canonical text and card
document ids are in :mod:`dreamer.text`.

How a roll-up works and why: ``docs/design/rollup.md``.
"""

from __future__ import annotations
