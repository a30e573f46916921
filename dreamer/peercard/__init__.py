"""The peer card: a bounded summary of the roll-up cards per profile, optionally polished by reflect."""
