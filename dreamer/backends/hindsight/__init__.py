"""The Hindsight HTTP backend."""
