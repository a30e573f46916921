"""The read side: which banks an agent may use, labelled recall across them, tool schemas and the prelude."""
