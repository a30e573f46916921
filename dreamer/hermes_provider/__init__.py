"""A Hermes memory provider over Dreamer's read side, and the command that installs it into a Hermes home."""
