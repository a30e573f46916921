"""The registry of subcommands: a name two groups register is refused, not silently overridden."""

from __future__ import annotations

import pytest

from dreamer.cli.registry import CommandGroup, in_order


class TestInOrder:
    def test_a_name_registered_twice_is_refused(self) -> None:
        """Two groups defining the same command name is an error, not a silent override."""
        first, second = CommandGroup(), CommandGroup()
        first.subcommand("x", help="first")(lambda args: 0)
        second.subcommand("x", help="second")(lambda args: 0)
        with pytest.raises(ValueError, match="'x' is registered twice"):
            in_order(first, second)
