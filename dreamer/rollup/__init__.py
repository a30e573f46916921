"""The roll-up pipeline: from a profile bank's new units to deduplicated cards in the global bank.

Pure parts (no I/O, plain values in and out): `normalize` (canonical text and document ids),
`salience` (which new units matter), `extractive` (cards without a language model) and `dedup`
(duplicate / conflict / new verdicts against what was already promoted).
"""

from __future__ import annotations
