"""The embedded SQLite backend: the default store, no server needed."""
