"""``dreamer hermes install``: a thin plugin directory in ``$HERMES_HOME/plugins/<name>/`` that
imports the provider, and ``--uninstall``, which removes only what the install wrote.

The directory holds ``__init__.py`` (three lines that import :mod:`dreamer.hermes_provider.provider`),
``plugin.yaml`` (the description ``hermes memory setup`` lists) and ``.dreamer-install.json``, the
manifest of what was written and its digest: uninstall removes a file only when it is unchanged,
and never touches anything else in the directory. Nothing is followed through a symbolic link.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dreamer.errors import UsageError

__all__ = [
    "InstallReport",
    "configured_provider",
    "default_hermes_home",
    "env_file_sets",
    "hermes_command",
    "install_plugin",
    "plugin_files",
    "uninstall_plugin",
]

MANIFEST = ".dreamer-install.json"
DEFAULT_NAME = "dreamer"
#: Hermes' bundled memory providers: a user plugin of one of these names is never loaded.
BUNDLED = frozenset(
    {"byterover", "hindsight", "holographic", "honcho", "mem0", "openviking", "retaindb", "supermemory"}
)
#: What marks a directory as a Hermes home (``hermes setup`` writes the first two).
HOME_MARKERS = ("config.yaml", ".env", "memories", "sessions", "plugins")
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


@dataclass(frozen=True, slots=True)
class InstallReport:
    """What an install or uninstall did, file by file (``written``, ``unchanged``, ``removed``, ``kept``)."""

    directory: Path
    actions: dict[str, str] = field(default_factory=dict)

    def render(self) -> str:
        lines = [f"{self.directory}:"]
        lines.extend(f"  {name}: {action}" for name, action in sorted(self.actions.items()))
        return "\n".join(lines)


def default_hermes_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$HERMES_HOME``, else ``~/.hermes``: Hermes' own resolution outside a running agent."""
    env = os.environ if environ is None else environ
    value = env.get("HERMES_HOME", "").strip()
    if value:
        return Path(value).expanduser()
    return Path(env.get("HOME") or Path.home()) / ".hermes"


def hermes_command(home: Path, *args: str, environ: Mapping[str, str] | None = None) -> str:
    """``hermes ARGS`` as a shell line acting on ``home``: with ``HERMES_HOME=<home>`` in front unless
    ``home`` is the one ``hermes`` resolves in this environment anyway."""
    line = shlex.join(["hermes", *args])
    if os.path.realpath(home) == os.path.realpath(default_hermes_home(environ)):
        return line
    return f"HERMES_HOME={shlex.quote(os.path.abspath(home))} {line}"


def env_file_sets(home: Path, names: tuple[str, ...]) -> bool:
    """Whether ``home/.env`` (which Hermes loads into its environment) assigns one of ``names``; only
    the names are read, never a value."""
    try:
        lines = (home / ".env").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    for line in lines:
        name = line.strip().removeprefix("export ").split("=", 1)
        if len(name) == 2 and name[0].strip() in names and name[1].strip().strip("'\"").strip():
            return True
    return False


def plugin_files(
    *, name: str = DEFAULT_NAME, config_path: Path | None = None, profile: str | None = None
) -> dict[str, str]:
    """The files of the plugin directory, by name; the same arguments always give the same bytes."""
    arguments = []
    if config_path is not None:
        arguments.append(f"config_path={str(config_path)!r}")
    if profile is not None:
        arguments.append(f"profile={profile!r}")
    init = (
        '"""Dreamer memory for Hermes, written by `dreamer hermes install`; '
        'remove with `dreamer hermes install --uninstall`."""\n\n'
        "from dreamer.hermes_provider.provider import DreamerMemoryProvider\n\n\n"
        "def register(ctx):\n"
        f"    ctx.register_memory_provider(DreamerMemoryProvider({', '.join(arguments)}))\n"
    )
    yaml = (
        f"name: {name}\n"
        "version: 1.0.0\n"
        'description: "Dreamer: named Hindsight banks with a read/write policy, labelled multi-bank '
        'recall, the roll-up prelude and peer card."\n'
    )
    return {"__init__.py": init, "plugin.yaml": yaml}


def install_plugin(
    home: Path, *, name: str = DEFAULT_NAME, config_path: Path | None = None, profile: str | None = None
) -> InstallReport:
    """Write the plugin into ``home/plugins/<name>/``; idempotent. UsageError names what is wrong."""
    target = _target(home, name)
    files = plugin_files(
        name=name, config_path=config_path.resolve() if config_path else None, profile=profile
    )
    manifest = _read_manifest(target)
    if target.exists() and manifest is None and any(target.iterdir()):
        raise UsageError(
            f"{target} exists and was not written by dreamer hermes install; "
            "move it away or install under another --name"
        )
    report = InstallReport(target)
    digests = {n: _digest(t) for n, t in files.items()}
    try:
        target.parent.mkdir(mode=0o755, exist_ok=True)
        target.mkdir(mode=0o755, exist_ok=True)
        for filename, text in files.items():
            path = target / filename
            _refuse_link(path)
            current = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
            if current == text:
                report.actions[filename] = "unchanged"
                continue
            if path.exists() and (manifest is None or filename not in manifest):
                raise UsageError(f"{path} exists and was not written by dreamer hermes install; move it away")
            if current is not None and manifest is not None and _digest(current) != manifest[filename]:
                # Edited since the install wrote it: the user's edit wins, as on uninstall.
                report.actions[filename] = (
                    "kept (changed since the install; remove it and install again to get the new one)"
                )
                digests[filename] = manifest[filename]
                continue
            _write(path, text)
            report.actions[filename] = "written"
        _refuse_link(target / MANIFEST)
        _write(target / MANIFEST, json.dumps(digests, indent=2) + "\n")
    except PermissionError as exc:
        raise UsageError(
            f"cannot write {exc.filename or target}: permission denied; run as the user who owns the "
            "Hermes home, or pass --home"
        ) from None
    except OSError as exc:
        raise UsageError(f"cannot write {exc.filename or target}: {exc.strerror or exc}") from None
    return report


def uninstall_plugin(home: Path, *, name: str = DEFAULT_NAME) -> InstallReport:
    """Remove the files the install wrote (unchanged ones only), its manifest, and the emptied directory."""
    target = _target(home, name)
    manifest = _read_manifest(target)
    if manifest is None:
        raise UsageError(f"nothing to uninstall: {target} holds no {MANIFEST} from dreamer hermes install")
    report = InstallReport(target)
    try:
        for filename, digest in manifest.items():
            path = target / filename
            if "/" in filename or filename.startswith(".") or path.is_symlink() or not path.is_file():
                report.actions[filename] = "kept (not a file the install wrote)" if path.exists() else "gone"
                continue
            if _digest(path.read_text(encoding="utf-8", errors="replace")) != digest:
                report.actions[filename] = "kept (changed since the install)"
                continue
            path.unlink()
            report.actions[filename] = "removed"
        (target / MANIFEST).unlink()
        pycache = target / "__pycache__"
        if pycache.is_dir() and not pycache.is_symlink():
            for compiled in pycache.glob("*.pyc"):
                compiled.unlink()
            _rmdir_if_empty(pycache)
        _rmdir_if_empty(target)
    except OSError as exc:
        raise UsageError(f"cannot remove {exc.filename or target}: {exc.strerror or exc}") from None
    return report


# --- checks and writes ---------------------------------------------------------------------------


def _target(home: Path, name: str) -> Path:
    if not _NAME.match(name):
        raise UsageError(
            f"--name {name!r}: use 1-63 lowercase letters, digits or '_', starting with a letter"
        )
    if name in BUNDLED:
        raise UsageError(
            f"--name {name!r} is a memory provider bundled with Hermes, which would win; pick another"
        )
    # `hermes setup` asks its questions; --non-interactive makes the home without them.
    setup = hermes_command(home, "setup", "--non-interactive")
    if _missing(home):
        raise UsageError(
            f"{home} does not exist; create the Hermes home with `{setup}`, or pass the Hermes home "
            "with --home (default: $HERMES_HOME, else ~/.hermes)"
        )
    if not os.path.isdir(home):  # never raises (Path.is_dir does, for a name too long)
        raise UsageError(
            f"{home} is not a directory; pass the Hermes home with --home (default: $HERMES_HOME)"
        )
    if not any((home / marker).exists() for marker in HOME_MARKERS):
        raise UsageError(
            f"{home} is not a Hermes home (none of {', '.join(HOME_MARKERS)}); make it one with "
            f"`{setup}`, or pass the Hermes home with --home"
        )
    plugins = home / "plugins"
    if plugins.is_symlink():
        raise UsageError(f"{plugins} is a symbolic link; Dreamer does not write through one")
    target = plugins / name
    _refuse_link(target)
    if target.exists() and not target.is_dir():
        raise UsageError(f"{target} exists and is not a directory; move it away")
    return target


_PROVIDER_LINE = re.compile(r"""^\s+provider:\s*(?:"([^"]*)"|'([^']*)'|([^\s#]*))\s*(?:#.*)?$""")


def configured_provider(home: Path) -> str | None:
    """``memory.provider`` of ``home/config.yaml`` ("" for Hermes' built-in memory only), or None
    when the file is missing or does not say (read with PyYAML when it is there, as Hermes reads
    it, else line by line for the block form Hermes writes)."""
    path = home / "config.yaml"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    try:
        import yaml  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        yaml = None
    if yaml is not None:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            return None
        memory = data.get("memory") if isinstance(data, dict) else None
        value = memory.get("provider") if isinstance(memory, dict) else None
        return None if value is None else str(value)
    inside = False
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            inside = line.split("#", 1)[0].strip() == "memory:"
            continue
        match = _PROVIDER_LINE.match(line) if inside else None
        if match is not None:
            return next(g for g in match.groups() if g is not None)
    return None


def _missing(path: Path) -> bool:
    """Nothing is there (a name the file system refuses, too long or so, is not "missing")."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise UsageError(f"{path} is a symbolic link; Dreamer does not write through one: remove it")


def _read_manifest(target: Path) -> dict[str, str] | None:
    path = target / MANIFEST
    if path.is_symlink() or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise UsageError(f"{path} is damaged; remove the directory {target} by hand") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise UsageError(f"{path} is damaged; remove the directory {target} by hand")
    return data


def _write(path: Path, text: str) -> None:
    """Replace ``path`` atomically: a link planted after the check is replaced, never followed."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o644)
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _rmdir_if_empty(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not empty: something that is not ours stays
        directory.rmdir()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
