"""docs/deploy.md, run as written: every ``sh`` block of the page, in order, in one shell, as root,
once against the dev Hindsight server and once on the embedded store.

The walk runs in a private mount namespace (``unshare --mount``) where ``/etc``, ``/var``, ``/opt``,
``/usr/local`` and ``/root`` are overlays whose writes land in a tmpfs that goes with the namespace:
the commands install into ``/opt/dreamer``, write ``/etc/dreamer`` and start the unit exactly as
the page says, and the machine is left as it was. What the page takes as given is made first, and
said here: a Hermes installed the way its installer does (a virtual environment under
``~/.hermes/hermes-agent`` with ``hermes`` linked into ``~/.local/bin``; it reuses this
interpreter's packages through a path entry, but not its editable Dreamer, so the page's own
install step is what makes the provider importable there), and a Hermes profile ``research`` whose
``hindsight/config.json`` names the dev server and its key. systemd is not PID 1 here, so
``systemctl`` / ``journalctl`` are tests/support/unitshim.py, which starts the installed unit's
``ExecStart=`` with systemd's environment (notify socket, state, configuration and credentials
directories, journal stream) but not its sandbox or dynamic user. ``pip`` installs from a
wheelhouse (``$DREAMER_DEPLOY_WHEELHOUSE``, built by .ci/run), so no test reaches beyond the
machine.

The page's text is changed in the places :data:`SUBSTITUTIONS` lists and nowhere else. Needs root,
``unshare``, overlayfs, jq and the wheelhouse; without them it is skipped saying which, and with
``DREAMER_REQUIRE_DEPLOY=1`` (as in CI) it fails instead.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.hindsight_fixtures import HINDSIGHT_API_KEY_VAR, HINDSIGHT_URL_VAR

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "deploy.md"
SHIM = REPO / "tests" / "support" / "unitshim.py"
WHEELHOUSE_ENV = "DREAMER_DEPLOY_WHEELHOUSE"
KEY_ENV = HINDSIGHT_API_KEY_VAR
#: What the walk overlays: every place the page writes outside the user's home.
OVERLAID = ("/etc", "/var", "/opt", "/usr/local", "/root")
MARK = "### deploy-walk block"
SMOKE = "Dreamer rolls up the research profile's memories into the global bank every hour."


def sh_blocks(text: str) -> list[tuple[str, str]]:
    """Each fenced ``sh`` block of the page with the heading it stands under, in order."""
    blocks, heading = [], ""
    lines = iter(text.splitlines())
    for line in lines:
        if line.startswith("#"):
            heading = line.lstrip("# ").strip()
        elif line.strip() == "```sh":
            body = []
            for inner in lines:
                if inner.strip() == "```":
                    break
                body.append(inner)
            blocks.append((heading, "\n".join(body)))
    return blocks


def substitutions(backend: str, url: str, suffix: str) -> list[tuple[str, str]]:
    """What the walk changes in the page's text, and nothing else."""
    subs = [
        ("http://127.0.0.1:8888", url),  # the server's URL
        ("'YOUR-API-KEY'", '"$DEPLOY_API_KEY"'),  # the key, never in the script's text
        ("private__hermes", f"private__hermes{suffix}"),  # a rerun on one server starts clean
        ("jitter_s = 120", "jitter_s = 2"),  # the first run within seconds
    ]
    if backend == "embedded":
        subs.append(('kind = "hindsight"', 'kind = "embedded"'))
    return subs


def apply(blocks: list[tuple[str, str]], subs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The blocks with each substitution made; one that no block needs any more stops the walk."""
    joined = "\n".join(body for _heading, body in blocks)
    for old, _new in subs:
        assert old in joined, f"docs/deploy.md no longer says {old!r}; update the walk's substitutions"
    changed = []
    for heading, body in blocks:
        for old, new in subs:
            body = body.replace(old, new)
        changed.append((heading, body))
    return changed


def precondition(url: str) -> str:
    """The host the page starts on: overlays, the stand-ins on PATH, Hermes with one profile."""
    overlays = "\n".join(
        f'mkdir -p "$T/ovl{i}/up" "$T/ovl{i}/work"; '
        f'mount -t overlay overlay -o lowerdir={d},upperdir="$T/ovl{i}/up",workdir="$T/ovl{i}/work" {d}'
        for i, d in enumerate(OVERLAID)
    )
    py = shlex.quote(sys.executable)
    site = shlex.quote(next(p for p in sys.path if p.endswith("site-packages")))
    hindsight = {"mode": "local_external", "api_url": url}
    return f"""set -euo pipefail
T=$(mktemp -d /tmp/deploy-walk.XXXXXX)
mount -t tmpfs tmpfs "$T"
{overlays}
export HOME="$T/home" UNITSHIM_DIR="$T/unitshim" PIP_NO_INDEX=1 PIP_FIND_LINKS="$WHEELHOUSE"
mkdir -p "$HOME/.local/bin" "$T/shim"
for tool in systemctl journalctl; do
    printf '#!/bin/sh\\nexec %s %s %s "$@"\\n' {py} {shlex.quote(str(SHIM))} "$tool" > "$T/shim/$tool"
    chmod 755 "$T/shim/$tool"
done
export PATH="$T/shim:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$HOME/.local/bin"
trap 'systemctl stop dreamer >/dev/null 2>&1 || true' EXIT
hv="$HOME/.hermes/hermes-agent/venv"
{py} -m venv "$hv"
echo {site} > "$(echo "$hv"/lib/python3*/site-packages)/hermes-host.pth"
printf '#!%s\\nimport sys\\nfrom hermes_cli.main import main\\nsys.exit(main())\\n' "$hv/bin/python" \\
    > "$hv/bin/hermes"
chmod 755 "$hv/bin/hermes"
ln -s "$hv/bin/hermes" "$HOME/.local/bin/hermes"
HERMES_HOME="$HOME/.hermes/profiles/research" hermes setup --non-interactive > /dev/null
mkdir -p "$HOME/.hermes/profiles/research/hindsight"
jq -n --argjson base {shlex.quote(json.dumps(hindsight))} '$base + {{apiKey: env.DEPLOY_API_KEY}}' \\
    > "$HOME/.hermes/profiles/research/hindsight/config.json"
"""


def blocks_script(blocks: list[tuple[str, str]]) -> str:
    """The blocks as one ``set -euo pipefail`` script, each after a line that marks it in the
    output: the first command that fails ends the walk before the end mark."""
    parts = ["set -euo pipefail"]
    for i, (heading, body) in enumerate(blocks):
        parts.append(f"printf '\\n{MARK} {i}: %s\\n' {shlex.quote(heading)}")
        parts.append(body)
    parts.append(f"printf '\\n{MARK} end\\n'")
    return "\n".join(parts) + "\n"


def walk_script(backend: str, url: str, suffix: str, workdir: Path) -> str:
    """The precondition, then every ``sh`` block of docs/deploy.md as :func:`substitutions` changes it."""
    blocks = apply(sh_blocks(DOC.read_text(encoding="utf-8")), substitutions(backend, url, suffix))
    return precondition(url) + f"cd {shlex.quote(str(workdir))}\n" + blocks_script(blocks)


def by_block(output: str) -> dict[str, str]:
    """The walk's output, by the heading of the block that printed it (blocks of one heading
    joined)."""
    found: dict[str, str] = {}
    for chunk in output.split(f"\n{MARK} ")[1:]:
        head, _, body = chunk.partition("\n")
        name = head.partition(": ")[2] or head
        found[name] = found.get(name, "") + body
    return found


def missing_requirement() -> str | None:
    if os.geteuid() != 0:
        return "the walk runs as root (it mounts overlays in a private namespace)"
    for tool in ("unshare", "mount", "jq", "systemd-analyze"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    wheels = os.environ.get(WHEELHOUSE_ENV)
    if not wheels or not Path(wheels).is_dir():
        return f"${WHEELHOUSE_ENV} names no wheelhouse (.ci/run builds one with pip wheel)"
    if not os.environ.get(HINDSIGHT_URL_VAR):
        return f"no dev Hindsight (${HINDSIGHT_URL_VAR}; scripts/hindsight-dev up)"
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"unshare --mount is not allowed here: {probe.stderr.strip()}"
    return None


@pytest.fixture
def requirements() -> None:
    reason = missing_requirement()
    if reason is None:
        return
    if os.environ.get("DREAMER_REQUIRE_DEPLOY") == "1":
        pytest.fail(f"DREAMER_REQUIRE_DEPLOY=1 and {reason}")
    pytest.skip(reason)


def clone(tmp_path: Path) -> Path:
    """The repository's files as a clone has them (``pip install .`` builds in place)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    work = tmp_path / "dreamer"
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, work / name)
    return work


def run_walk(tmp_path: Path, backend: str) -> dict[str, str]:
    url = os.environ[HINDSIGHT_URL_VAR]
    suffix = f"_deploy{uuid.uuid4().hex[:8]}"
    script = tmp_path / "walk.sh"
    script.write_text(walk_script(backend, url, suffix, clone(tmp_path)), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DREAMER_", "HINDSIGHT_", "HERMES_"))}
    env.pop("NOTIFY_SOCKET", None)
    env.pop("PYTHONPATH", None)
    env.update(DEPLOY_API_KEY=os.environ.get(KEY_ENV, ""), WHEELHOUSE=os.environ[WHEELHOUSE_ENV])
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "bash", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"the walk stopped (exit {done.returncode}):\n{output[-6000:]}"
    assert f"{MARK} end" in done.stdout
    return by_block(done.stdout)


@pytest.mark.usefixtures("requirements")
@pytest.mark.parametrize("backend", ["hindsight", "embedded"])
def test_the_deploy_walk_runs_as_written(tmp_path: Path, backend: str) -> None:
    """Every command of docs/deploy.md exits 0 in order, and each step shows what the page says it
    shows: the install, a checked configuration, a service that became ready, a first run that
    promoted the memory written in step 4, the status, card and explain of it, Hermes with Dreamer
    as its active provider, and a moved state directory that keeps the watermark."""
    out = run_walk(tmp_path, backend)
    assert re.search(r"dreamer \d+\.\d+", out["1. Install"])
    assert 'backend.hindsight.api_key = "**********"' in out["4. The key, and a check"]
    assert "active (running)" in out["5. The service"]
    first_hour = out["6. The first hour"]
    finished = [json.loads(line) for line in first_hour.splitlines() if line.startswith('{"profile"')]
    assert {"profile": "research", "outcome": "promoted"}.items() <= next(
        r for r in finished if r["profile"] == "research"
    ).items(), first_hour
    assert '"embedder":' in first_hour
    assert re.search(r"^research: .*last promoted at", first_hour, re.M), first_hour
    assert "research" in first_hour and "card rollup:research:" in first_hour, first_hour
    hermes = out["7. Hermes reads through Dreamer"]
    assert re.search(r"dreamer .*← active", hermes), hermes
    moved = out["8. More hosts"]
    assert re.search(r"^research: .*watermark 20", moved, re.M), moved


class TestTheWalkItself:
    def test_every_sh_block_of_the_page_is_in_the_walk(self) -> None:
        """The walk is made of the page's ``sh`` blocks, all of them: a block added to the page is
        run without a change here."""
        text = DOC.read_text(encoding="utf-8")
        blocks = sh_blocks(text)
        assert len(blocks) == text.count("```sh\n")
        script = walk_script("hindsight", "http://127.0.0.1:1", "_x", Path("/nowhere"))
        for _heading, body in apply(blocks, substitutions("hindsight", "http://127.0.0.1:1", "_x")):
            assert body in script

    def test_the_key_is_never_in_the_script(self) -> None:
        """The key reaches the walk through the environment, so the script (a file under the test's
        directory) and a failure's printout never hold it."""
        script = walk_script("hindsight", "http://127.0.0.1:1", "_x", Path("/nowhere"))
        assert "YOUR-API-KEY" not in script and '"$DEPLOY_API_KEY"' in script

    def test_a_substitution_the_page_lost_stops_the_walk(self) -> None:
        """A page that no longer says what a substitution replaces fails loudly instead of
        running against the wrong server."""
        with pytest.raises(AssertionError, match="no longer says"):
            apply([("1. Install", "nothing here")], [("http://127.0.0.1:8888", "http://127.0.0.1:1")])

    def test_a_failing_command_ends_the_walk(self, tmp_path: Path) -> None:
        """A command that fails, also inside a pipe, stops the script before the next block and
        before the end mark, so the walk cannot pass over it."""
        for failing in ("false", "false | cat"):
            script = blocks_script([("one", failing), ("two", "echo reached")])
            done = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
            assert done.returncode != 0
            assert "reached" not in done.stdout and f"{MARK} end" not in done.stdout
        script = blocks_script([("one", "true")])
        done = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
        assert done.returncode == 0 and by_block(done.stdout) == {"one": "", "end": ""}
