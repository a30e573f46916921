"""The roll-up pipeline: from a profile bank's new units to deduplicated cards in the global bank.

`pipeline` runs the steps. Five modules here do I/O: `pipeline` (the backend, the state file, the
clock), `activity` (one activity snapshot per cycle: the backend's activity call), `summarise` (the
backend's reflect or the ``[llm]`` model), `judging` (the state file's word index and ledger) and
`semantic` (the embedder and the state file's vectors). The rest are pure (plain values in and
out): `context` (one run's state), `gate` (run or skip), `salience` (which new units matter),
`batches` (the units cut into batches), `cards` (the reflect request and its answer), `extractive`
(cards without a language model), `grounding` (a card keeps only the units it holds),
`similarity`, `candidates`, `dedup`, `dedup_rules`, `dedup_values` and `verdicts` (duplicate /
conflict / new verdicts), `promote` (what a promoted card carries) and `report` (what a run did);
`planning` (what becomes of a judged batch) is pure apart from its log lines. Protected details are
in :mod:`dreamer.details`, canonical text and card document ids in :mod:`dreamer.text`.

How a roll-up works and why: ``docs/design/rollup.md``.
"""

from __future__ import annotations
