"""The embedded SQLite backend: the default store, no server needed.

One local SQLite file holds every bank; recall is full-text (FTS5, BM25), reflect is extractive.
The class is :class:`dreamer.backends.embedded.backend.EmbeddedBackend`; the parts it is made of:

- :mod:`.schema`: the file (schema, versions and upgrades, opening it, the write transaction, how
  keys and times are stored, SQLite errors as backend errors);
- :mod:`.retain`: checking and writing a retained batch;
- :mod:`.search`: the bank-scoped full-text search, tag filters and scores;
- :mod:`.reflect`: the extractive reflect answer.

Design and measurements: ``docs/design/embedded-store.md``.
"""
