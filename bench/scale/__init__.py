"""What one roll-up run costs as the ledger and the global bank grow: ``python -m bench.scale``.

One real ``dreamer run`` daemon per ledger size, measured from outside (its notify socket, its JSON
log, ``/proc``), against the floor of a run: listing the new units and committing their ledger rows.
"""
