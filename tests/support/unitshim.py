"""``systemctl`` and ``journalctl`` for one unit, where systemd is not PID 1 (a container, CI).

The deploy walk (tests/e2e/test_deploy_doc.py) runs docs/deploy.md's commands as written; the ones
that talk to systemd come here. This script starts the unit the way systemd would start it, from
the installed unit file: its ``ExecStart=`` with the environment systemd gives a ``Type=notify``
service (``NOTIFY_SOCKET``, ``WATCHDOG_USEC``, ``JOURNAL_STREAM``, ``INVOCATION_ID``,
``STATE_DIRECTORY``, ``CONFIGURATION_DIRECTORY``, ``CREDENTIALS_DIRECTORY`` with the
``LoadCredential=`` files copied in, or ``SetCredential=``'s value when a file is missing), its
``UMask=``, its output to a journal file, and a supervisor that reads the notify socket (READY,
STATUS) the way systemd does. What it does not do: run as a dynamic user, sandbox the process, or
restart it. ``daemon-reload`` runs ``systemd-analyze verify`` on the installed unit.

Stdlib only, run by any python3: ``unitshim.py systemctl ARGS`` / ``unitshim.py journalctl ARGS``.
Its files live in ``$UNITSHIM_DIR``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

UNIT_DIR = Path("/etc/systemd/system")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PRIORITIES = {"emerg": 0, "alert": 1, "crit": 2, "err": 3, "warning": 4, "notice": 5, "info": 6, "debug": 7}


def shim_dir() -> Path:
    path = Path(os.environ["UNITSHIM_DIR"])
    path.mkdir(parents=True, exist_ok=True)
    return path


def unit_name(arg: str) -> str:
    return arg if arg.endswith(".service") else f"{arg}.service"


def read_unit(name: str) -> dict[str, list[str]]:
    """Every ``Key=value`` of the unit file and its drop-ins, in order, by key."""
    files = [UNIT_DIR / name, *sorted((UNIT_DIR / f"{name}.d").glob("*.conf"))]
    keys: dict[str, list[str]] = {}
    for file in files:
        if not file.is_file():
            continue
        for raw in file.read_text(encoding="utf-8").splitlines():
            line = raw.strip()
            if not line or line.startswith(("#", ";", "[")) or "=" not in line:
                continue
            key, _, value = line.partition("=")
            keys.setdefault(key.strip(), []).append(value.strip())
    if not keys:
        sys.exit(f"Unit {name} not found.")
    return keys


def state_path(name: str) -> Path:
    return shim_dir() / f"{name}.json"


def read_state(name: str) -> dict[str, object]:
    try:
        return dict(json.loads(state_path(name).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def write_state(name: str, **changes: object) -> None:
    state = read_state(name) | changes
    tmp = state_path(name).with_suffix(".tmp")
    tmp.write_text(json.dumps(state), encoding="utf-8")
    os.replace(tmp, state_path(name))


def running(name: str) -> bool:
    state = read_state(name)
    return state.get("active") == "active" and isinstance(state.get("pid"), int)


# --- the supervisor: what systemd does for a started unit ---------------------------------------


def credentials(keys: dict[str, list[str]], into: Path) -> None:
    into.mkdir(mode=0o700, parents=True, exist_ok=True)
    fallback = {}
    for spec in keys.get("SetCredential", []):
        cred, _, value = spec.partition(":")
        fallback[cred] = value.encode().decode("unicode_escape")
    loaded = set()
    for spec in keys.get("LoadCredential", []):
        cred, _, source = spec.partition(":")
        if Path(source).is_file():
            shutil.copyfile(source, into / cred)
            (into / cred).chmod(0o400)
            loaded.add(cred)
    for cred, value in fallback.items():
        if cred not in loaded:
            (into / cred).write_text(value, encoding="utf-8")
            (into / cred).chmod(0o400)


def supervise(name: str) -> None:
    keys = read_unit(name)
    base = shim_dir()
    env = {"PATH": PATH, "LANG": os.environ.get("LANG", "C.UTF-8"), "INVOCATION_ID": uuid.uuid4().hex}
    for key, var, root in (
        ("StateDirectory", "STATE_DIRECTORY", Path("/var/lib")),
        ("ConfigurationDirectory", "CONFIGURATION_DIRECTORY", Path("/etc")),
    ):
        if key in keys:
            path = root / keys[key][-1]
            mode = int(keys.get(f"{key}Mode", ["0755"])[-1], 8)
            path.mkdir(mode=mode, parents=True, exist_ok=True)
            env[var] = str(path)
    creds = base / "credentials" / name
    credentials(keys, creds)
    env["CREDENTIALS_DIRECTORY"] = str(creds)
    sock_path = base / f"{name}.notify"
    sock_path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.settimeout(0.2)
    env["NOTIFY_SOCKET"] = str(sock_path)
    if "WatchdogSec" in keys:
        env["WATCHDOG_USEC"] = str(int(float(keys["WatchdogSec"][-1]) * 1_000_000))
    journal = open(base / f"{name}.journal", "ab", buffering=0)  # noqa: SIM115 (held for the child)
    st = os.fstat(journal.fileno())
    env["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
    umask = int(keys.get("UMask", ["0022"])[-1], 8)
    argv = shlex.split(keys["ExecStart"][-1].lstrip("-@:+!"))
    child = subprocess.Popen(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=journal, stderr=journal, umask=umask, cwd="/"
    )
    write_state(name, active="activating", pid=child.pid, status="", exit=None, started=time.time())
    while child.poll() is None:
        try:
            data = sock.recv(65536).decode("utf-8", "replace")
        except TimeoutError:
            continue
        for line in data.splitlines():
            key, _, value = line.partition("=")
            if key == "READY" and value == "1":
                write_state(name, active="active")
            elif key == "STATUS":
                write_state(name, status=value)
            elif key == "STOPPING" and value == "1":
                write_state(name, active="deactivating")
    code = child.returncode
    write_state(name, active="inactive" if code in (0, -signal.SIGTERM) else "failed", pid=None, exit=code)
    sock.close()
    sock_path.unlink(missing_ok=True)


# --- systemctl ------------------------------------------------------------------------------------


def start(name: str) -> int:
    if running(name):
        return 0
    keys = read_unit(name)
    write_state(name, active="activating", pid=None, exit=None)
    subprocess.Popen(
        [sys.executable, __file__, "_supervise", name],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + float(keys.get("TimeoutStartSec", ["90"])[-1])
    while time.monotonic() < deadline:
        state = read_state(name)
        if state.get("active") == "active":
            return 0
        if state.get("active") in ("failed", "inactive") and state.get("exit") is not None:
            print(f"Job for {name} failed: the process exited with status {state['exit']}.", file=sys.stderr)
            return 1
        time.sleep(0.1)
    print(f"Job for {name} timed out before READY=1.", file=sys.stderr)
    return 1


def stop(name: str) -> int:
    state = read_state(name)
    pid = state.get("pid")
    if not isinstance(pid, int):
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + float(read_unit(name).get("TimeoutStopSec", ["90"])[-1])
    while time.monotonic() < deadline:
        if read_state(name).get("pid") is None:
            return 0
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    print(f"{name}: stop timed out; killed", file=sys.stderr)
    return 1


def status(name: str) -> int:
    keys = read_unit(name)
    state = read_state(name)
    active = str(state.get("active") or "inactive")
    print(f"● {name} - {keys.get('Description', [name])[-1]}")
    print(f"     Loaded: loaded ({UNIT_DIR / name}; enabled)")
    shown = {"active": "active (running)", "failed": f"failed (Result: exit-code {state.get('exit')})"}
    print(f"     Active: {shown.get(active, active)}")
    if state.get("pid"):
        print(f"   Main PID: {state['pid']}")
    if state.get("status"):
        print(f'     Status: "{state["status"]}"')
    return 0 if active == "active" else 3


def daemon_reload() -> int:
    for unit in sorted(UNIT_DIR.glob("*.service")):
        done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
        if done.returncode != 0 or done.stderr.strip():
            print(done.stderr or done.stdout, file=sys.stderr, end="")
            return 1
    return 0


def systemctl(args: list[str]) -> int:
    words = [a for a in args if not a.startswith("-")]
    flags = {a for a in args if a.startswith("-")}
    if not words:
        sys.exit("systemctl: no command")
    command, units = words[0], [unit_name(u) for u in words[1:]]
    if command == "daemon-reload":
        return daemon_reload()
    codes = []
    for name in units:
        if command == "enable":
            read_unit(name)
            codes.append(start(name) if "--now" in flags else 0)
        elif command in ("start", "restart"):
            if command == "restart":
                stop(name)
            codes.append(start(name))
        elif command == "stop":
            codes.append(stop(name))
        elif command == "reload":
            pid = read_state(name).get("pid")
            if not isinstance(pid, int):
                print(f"{name} is not active, cannot reload.", file=sys.stderr)
                codes.append(1)
            else:
                os.kill(pid, signal.SIGHUP)
                codes.append(0)
        elif command == "status":
            codes.append(status(name))
        elif command == "is-active":
            state = str(read_state(name).get("active") or "inactive")
            print(state)
            codes.append(0 if state == "active" else 3)
        else:
            sys.exit(f"systemctl {command}: not known to this stand-in")
    return max(codes, default=0)


# --- journalctl -----------------------------------------------------------------------------------


def journalctl(args: list[str]) -> int:
    unit, output, priority, lines = None, "short", 7, None
    it = iter(args)
    for arg in it:
        if arg in ("-u", "--unit"):
            unit = unit_name(next(it))
        elif arg == "-o":
            output = next(it)
        elif arg == "-p":
            level = next(it)
            priority = int(level) if level.isdigit() else PRIORITIES[level]
        elif arg == "-n":
            lines = int(next(it))
        elif arg in ("--no-pager", "-q"):
            continue
        else:
            sys.exit(f"journalctl {arg}: not known to this stand-in")
    if unit is None:
        sys.exit("journalctl: give -u UNIT")
    path = shim_dir() / f"{unit}.journal"
    records = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines() if path.exists() else []:
        level = 6
        if raw.startswith("<") and raw[2:3] == ">" and raw[1:2].isdigit():
            level, raw = int(raw[1]), raw[3:]
        if level <= priority:
            records.append(raw)
    if lines is not None:
        records = records[-lines:] if lines else []
    host = socket.gethostname()
    for line in records:
        print(line if output == "cat" else f"{host} {unit.removesuffix('.service')}: {line}")
    return 0


def main() -> int:
    tool, args = sys.argv[1], sys.argv[2:]
    if tool == "_supervise":
        supervise(args[0])
        return 0
    return systemctl(args) if tool == "systemctl" else journalctl(args)


if __name__ == "__main__":
    sys.exit(main())
