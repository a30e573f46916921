"""The Hindsight HTTP backend.

``backend`` holds :class:`~dreamer.backends.hindsight.backend.HindsightBackend`; ``allowlist`` the
requests it may send; ``models`` the answers it reads; ``statuses`` how failures are classified.
"""
