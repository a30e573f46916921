"""Language-model calls Dreamer makes itself: an OpenAI-compatible chat client and token counts."""
