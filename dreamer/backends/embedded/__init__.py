"""The embedded SQLite backend: the default store, no server needed.

One local SQLite file holds every bank; recall is full-text (FTS5, BM25), reflect is extractive.
Given an embedder, it also keeps each unit's vector and recalls by full text and vectors together.
The class is :class:`dreamer.backends.embedded.backend.EmbeddedBackend`; the parts it is made of:

- :mod:`.schema`: the file (schema, versions and upgrades, opening it, the write transaction, how
  keys and times are stored, SQLite errors as backend errors);
- :mod:`.retain`: checking and writing a retained batch;
- :mod:`.reads`: the read queries (the banks' counters, the unit listing, full-text recall within
  a token budget, the units a reflect answers with);
- :mod:`.rows`: stored rows as the contract's values;
- :mod:`.search`: the bank-scoped full-text search, tag filters and scores;
- :mod:`.vector_store`: the stored vectors, their exact cosines and the backlog;
- :mod:`.vector_matrix`: a bank's vectors in memory as int8 codes, and the view one recall searches;
- :mod:`.vector_cache`: the per-bank cache, refreshed incrementally, its pages on disk as segments;
- :mod:`.embedding`: calling the embedder, its answer checked, a fault turned into None;
- :mod:`.hybrid`: the full-text ranking fused with the vector ranking;
- :mod:`.reflect`: the extractive reflect answer.

Design and measurements: ``docs/design/embedded-store.md``.
"""
