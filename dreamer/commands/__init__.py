"""The bodies of the CLI commands: each takes a loaded configuration and prints its result."""
