"""Precision and recall of Dreamer's dedup verdicts on the labelled LoCoMo pairs, per route."""
