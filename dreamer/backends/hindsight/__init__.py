"""The Hindsight HTTP backend.

``backend`` holds :class:`~dreamer.backends.hindsight.backend.HindsightBackend`; ``allowlist`` the
requests it may send; ``models`` the answers it reads; ``convert`` the contract's values as request
bodies and the parsed answers as the contract's values; ``statuses`` how failures are classified.

Design notes: ``docs/design/hindsight.md``.
"""
