"""Real `systemd-analyze` as a test oracle: the host's, or another release's from jobgen's cache.

    host_analyzer()            the machine's /usr/bin/systemd-analyze (None when absent)
    versioned_analyzer(257)    Debian's systemd 257, fetched by scripts/fetch-systemd-versions
                               (None when not cached: callers skip and name FETCH_HINT)

Every analyzer answers the same questions, each call bounded by a timeout:

    verify(paths, stubs=())          -> VerifyResult(rc, lines)   project standard: rc == 0 and lines == []
    exec_argv(service, stubs=())     -> {"ExecStart": [argv, ...], ...}   how systemd splits Exec lines (252+)
    calendar(spec, base_time, iterations) -> CalendarResult(ok, normalized, elapses, error)
    timespan(text)                   -> microseconds or None
    security(service, stubs=())      -> overall exposure score (250+)

Units are checked in a sandbox, never against the host's systemd state:
- a private mount namespace (`unshare --mount`) in which stub executables appear at the
  absolute paths the units name (see _mount_stubs for why not `--root`);
- as the unprivileged user `nobody`: systemd 247's verify, run as root on a machine whose PID 1
  is not systemd, moves every process of the caller's cgroup into a new init.scope, and as root
  252 touches /run/systemd/systemd-units-load. Verify needs no privilege, so every version runs
  unprivileged, on world-readable copies of the units;
- SYSTEMD_UNIT_PATH = the units' folders + that release's own unit folder, with no trailing
  colon: a trailing colon appends the host's /etc and /lib unit folders, whose files a foreign
  release would parse (and complain about), and host admin units would leak into results.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

FETCH_HINT = "run scripts/fetch-systemd-versions"

# The releases scripts/fetch-systemd-versions fetches by default: systemd major -> Debian suite.
RELEASES = {247: "bullseye", 252: "bookworm", 257: "trixie", 262: "sid"}

# Version gates of systemd-analyze itself (systemd NEWS of the named version).
RECURSIVE_ERRORS_SINCE = 250  # v250: verify --recursive-errors=; before it, warnings exit 0
OFFLINE_SECURITY_SINCE = 250  # v250: security --offline=
QUOTED_DUMP_SINCE = 252  # v252: the unit dump quotes "Command Line:" with quote_command_line();
#                          247 prints bare or single-quoted words, which is ambiguous

TIMEOUT = 60.0  # seconds per systemd-analyze call; a normal call takes well under one
NOBODY = 65534
HOST_ANALYZER = Path("/usr/bin/systemd-analyze")
HOST_UNIT_DIRS = (Path("/usr/lib/systemd/system"), Path("/lib/systemd/system"))
UNIT_SUFFIXES = (".service", ".socket", ".timer", ".path", ".target", ".mount", ".automount",
                 ".swap", ".slice", ".scope", ".device")
UNIT_DIR_SUFFIXES = (".d", ".wants", ".requires", ".upholds")

# A clean environment: the caller's LANG, TZ or SYSTEMD_* must not change what systemd prints.
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "TZ": "UTC", "SYSTEMD_LOG_COLOR": "0", "SYSTEMD_PAGER": "", "SYSTEMD_COLORS": "0"}

STUB_SCRIPT = "#!/bin/sh\nexit 0\n"


class AnalyzerError(RuntimeError):
    """systemd-analyze could not be run, or said something this module cannot read."""


class Unsupported(AnalyzerError):
    """The question needs a newer systemd-analyze than this analyzer's version."""


@dataclass(frozen=True)
class VerifyResult:
    rc: int
    lines: list[str]


@dataclass(frozen=True)
class CalendarResult:
    ok: bool
    normalized: str | None
    elapses: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class Analyzer:
    """One systemd-analyze binary and the unit folder of the same release."""

    version: int
    label: str
    # How to start it, relative to `release` when set (the cache folder of a fetched release,
    # run through its own ld.so and glibc), else absolute paths on this machine.
    loader: tuple[str, ...]
    unit_dir: str
    release: Path | None = None

    def __str__(self) -> str:
        return self.label

    # ---- public API -------------------------------------------------------------------

    def verify(self, paths: Iterable[str | os.PathLike], stubs: Iterable[str] = ()) -> VerifyResult:
        """`systemd-analyze verify --man=no [--recursive-errors=yes]` on the given unit files.

        rc and every non-empty diagnostic line (paths of the sandbox copies are mapped back
        to the caller's). Exit status alone is not enough: before 250 warnings exit 0.
        """
        args = ["verify", "--man=no"]
        if self.version >= RECURSIVE_ERRORS_SINCE:
            args.append("--recursive-errors=yes")
        rc, lines = self._run_on_units(args, list(paths), stubs)
        return VerifyResult(rc, lines)

    def exec_argv(self, service_path: str | os.PathLike, stubs: Iterable[str] = ()) -> dict[str, list[list[str]]]:
        """argv of every Exec*= command as systemd parsed it, by directive, in file order.

        Read from the unit dump that verify prints at debug log level. Shown before runtime
        expansion ($VAR, $$ stay literal; %-specifiers are resolved); '-+!:|' prefixes are
        not shown; for '@' commands argv[0] is the given name.
        """
        self._require(QUOTED_DUMP_SINCE, "exec_argv (quoted Command Line: dump)")
        name = Path(service_path).name
        rc, lines = self._run_on_units(["verify", "--man=no"], [service_path], stubs,
                                       env={"SYSTEMD_LOG_LEVEL": "debug"})
        commands = parse_exec_dump(lines, name)
        if commands is None:
            raise AnalyzerError(f"{self}: no dump of {name} in verify output (rc={rc}):\n"
                                + "\n".join(line for line in lines if "Command" in line or "rror" in line))
        return commands

    def calendar(self, spec: str, base_time: str = "2025-01-01 00:00:00 UTC", iterations: int = 5) -> CalendarResult:
        """`systemd-analyze calendar` from a fixed base time (deterministic), in UTC."""
        rc, out = self._run_plain(["calendar", f"--base-time={base_time}", f"--iterations={iterations}", "--", spec])
        return parse_calendar(rc, out)

    def timespan(self, text: str) -> int | None:
        """Microseconds systemd makes of a time span, or None when it rejects it."""
        rc, out = self._run_plain(["timespan", "--", text])
        match = re.search(r"^\s*(?:μs|us): (\d+)$", out, re.M)
        return int(match.group(1)) if rc == 0 and match else None

    def security(self, service_path: str | os.PathLike, stubs: Iterable[str] = ()) -> float:
        """Overall exposure score of `security --offline=yes` (0.0 safest .. 10.0)."""
        self._require(OFFLINE_SECURITY_SINCE, "security --offline=yes")
        rc, lines = self._run_on_units(["security", "--offline=yes", "--no-pager"], [service_path], stubs)
        for line in lines:
            match = re.search(r"Overall exposure level for \S+: (\d+(?:\.\d+)?)", line)
            if match:
                return float(match.group(1))
        raise AnalyzerError(f"{self}: security printed no overall exposure (rc={rc}):\n" + "\n".join(lines))

    # ---- running it ---------------------------------------------------------------------

    def _require(self, since: int, what: str) -> None:
        if self.version < since:
            raise Unsupported(f"{what} needs systemd >= {since}; {self} is {self.version}")

    def _argv(self, release_at: Path | None) -> list[str]:
        """Command line prefix; release paths are resolved against `release_at`."""
        if self.release is None:
            return list(self.loader)
        ldso, library_path, binary = self.loader
        base = release_at or self.release
        libs = ":".join(str(base / part) for part in library_path.split(":"))
        return [str(base / ldso), "--library-path", libs, str(base / binary)]

    def _run_plain(self, args: Sequence[str]) -> tuple[int, str]:
        """calendar and timespan: no units, no manager, no sandbox needed."""
        proc = subprocess.run([*self._argv(None), *args], env=BASE_ENV, cwd="/", stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=TIMEOUT)
        return proc.returncode, _decode(proc.stdout + proc.stderr)

    def _run_on_units(self, args: Sequence[str], paths: Sequence[str | os.PathLike], stubs: Iterable[str],
                      env: dict[str, str] | None = None) -> tuple[int, list[str]]:
        with tempfile.TemporaryDirectory(prefix="jobgen-sdanalyze.") as tmp:
            work = Path(tmp)
            work.chmod(0o755)
            copies, folders, back = _stage_units([Path(p) for p in paths], work / "units")
            mounts = _stage_stubs(stubs, work / "stubs")
            # The release folder is bound to a path `nobody` can reach ($HOME is often 0700).
            release_at = None
            shell = ["set -e"]
            if self.release is not None:
                release_at = work / "release"
                release_at.mkdir(mode=0o755)
                shell.append(f"mount --bind {shlex.quote(str(self.release))} {shlex.quote(str(release_at))}")
            unit_dir = str(release_at / self.unit_dir) if release_at else self.unit_dir
            shell += [_overlay_command(lower, target) for lower, target in mounts]
            command = [*_drop_privileges(), *self._argv(release_at), *args, *map(str, copies)]
            shell.append("exec " + shlex.join(command))
            run_env = {**BASE_ENV, "SYSTEMD_UNIT_PATH": ":".join([*map(str, folders), unit_dir]), **(env or {})}
            proc = subprocess.run([*_namespace(), "/bin/sh", "-c", "\n".join(shell)], env=run_env, cwd="/",
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT)
            out = _decode(proc.stdout + proc.stderr)
            for copy_folder, original in back:
                out = out.replace(f"{copy_folder}/", f"{original}/").replace(str(copy_folder), str(original))
            if proc.returncode != 0 and _sandbox_failed(out):
                raise AnalyzerError(f"{self}: sandbox setup failed:\n{out}")
            # split("\n"), not splitlines(): systemd prints U+0085/U+2028/U+2029 raw inside
            # a quoted word of the dump, and splitlines() would cut the word there.
            return proc.returncode, [line for line in out.split("\n") if line.strip()]


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _sandbox_failed(out: str) -> bool:
    return any(line.startswith(("unshare:", "mount:", "setpriv:", "/bin/sh:")) for line in out.splitlines())


def _namespace() -> list[str]:
    """A private mount namespace: mounts made in it vanish with the process, the host never sees them.

    As root a plain one; otherwise a user namespace in which the caller may mount (Linux 5.11+
    lets it mount overlayfs there).
    """
    if os.geteuid() == 0:
        return ["unshare", "--mount", "--propagation", "private", "--"]
    return ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private", "--"]


def _drop_privileges() -> list[str]:
    """Run systemd-analyze as nobody (see the module docstring: systemd 247 and cgroups)."""
    if os.geteuid() == 0:
        return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    return []  # already unprivileged outside the user namespace


def _stage_units(paths: list[Path], into: Path) -> tuple[list[Path], list[Path], list[tuple[Path, Path]]]:
    """World-readable copies of the units' folders; one copy folder per source folder.

    The whole folder (unit files and drop-in/.wants folders), because systemd searches the
    folder of each unit it is given: a timer finds its service there, a service its drop-ins.
    Returns the copies of `paths`, the copy folders, and (copy folder, original folder) pairs.
    """
    folders: dict[Path, Path] = {}
    copies = []
    for path in paths:
        if not path.is_file():
            raise AnalyzerError(f"no such unit file: {path}")
        source = path.resolve().parent
        if source not in folders:
            target = into / str(len(folders))
            target.mkdir(parents=True, mode=0o755)
            for entry in sorted(source.iterdir()):
                if entry.is_file() and entry.name.endswith(UNIT_SUFFIXES):
                    shutil.copyfile(entry, target / entry.name)
                elif entry.is_dir() and entry.name.endswith(UNIT_DIR_SUFFIXES):
                    shutil.copytree(entry, target / entry.name)
            for copied in target.rglob("*"):
                copied.chmod(0o755 if copied.is_dir() else 0o644)
            folders[source] = target
        copy = folders[source] / path.name
        if not copy.exists():  # a unit file name systemd will reject; let it say so
            shutil.copyfile(path, copy)
            copy.chmod(0o644)
        copies.append(copy)
    back = [(copy_folder, original) for original, copy_folder in folders.items()]
    return copies, list(folders.values()), back


def _stage_stubs(stubs: Iterable[str], into: Path) -> list[tuple[Path, str]]:
    """Stub executables (`exit 0`) for absolute paths; returns (overlay layer, mount target) pairs.

    Why a mount namespace and not `verify --root=DIR` with stubs inside DIR: --root exists for
    verify only since 250 (247: "Option --root is only supported for cat-config right now"),
    and it changes how units are found (by name inside DIR, SYSTEMD_UNIT_PATH ignored), so the
    call would differ by version. Mounts change nothing about the call and work for all four.

    A file cannot be bind-mounted onto a path that does not exist (/usr/bin/php), so each stub
    goes into a read-only overlayfs of its nearest existing ancestor folder: the stub layer on
    top of the real folder, whose content stays visible (systemd-analyze itself lives in
    /usr/bin). Ancestors nested in one another are merged into the outermost one; "/" itself
    cannot be overlaid (it would hide /proc, /dev, ...), so a stub needs an existing top folder.
    """
    targets: dict[str, list[str]] = {}
    for stub in sorted(set(stubs)):
        if not stub.startswith("/") or stub.endswith("/") or re.search(r"[,:\\\s]", stub):
            raise AnalyzerError(f"stub must be an absolute file path without ',:\\' or spaces: {stub!r}")
        anchor = Path(stub).parent
        while not anchor.is_dir():
            anchor = anchor.parent
        if anchor == Path("/"):
            raise AnalyzerError(f"stub {stub}: its top folder does not exist here; cannot add it")
        targets.setdefault(str(anchor), []).append(stub)
    outer = [t for t in targets if not any(t != o and t.startswith(o + "/") for o in targets)]
    mounts = []
    for target in sorted(outer):
        layer = into / target.lstrip("/")
        for anchor, files in targets.items():
            if anchor == target or anchor.startswith(target + "/"):
                for stub in files:
                    file = into / stub.lstrip("/")
                    file.parent.mkdir(parents=True, exist_ok=True)
                    file.write_text(STUB_SCRIPT)
        for entry in [into, *into.rglob("*")]:
            entry.chmod(0o755)
        mounts.append((layer, target))
    return mounts


def _overlay_command(layer: Path, target: str) -> str:
    # Two lower layers and no upper one: a read-only overlay, nothing is ever written.
    options = f"lowerdir={layer}:{target}"
    return f"mount -t overlay jobgen-stubs -o {shlex.quote(options)} {shlex.quote(target)}"


# ---- reading systemd's output -----------------------------------------------------------

# cescape() of systemd's src/basic/escape.c, as used by quote_command_line() for control chars.
C_ESCAPES = {"a": b"\a", "b": b"\b", "f": b"\f", "n": b"\n", "r": b"\r", "t": b"\t", "v": b"\v",
             "\\": b"\\", '"': b'"', "'": b"'", "$": b"$", "`": b"`", "s": b" "}


def split_command_line(text: str) -> list[str]:
    """Split a `Command Line:` of the unit dump back into argv.

    systemd 252+ quote_command_line(): an argument is printed bare unless it is empty or holds
    a space, a control char, DEL or one of `"\\'$`;&|*?<>()[]{}!` (roughly); then it is double-
    quoted, with \\ " $ ` backslash-escaped and control chars C-escaped (\\n \\t, others octal
    \\001). Bytes >= 0x80 (UTF-8) are printed raw. Unlike a shell, `#` and `~` are not special
    here. Single quotes and bare backslashes are accepted too (systemd 247 style), best effort.
    """
    data = text.encode("utf-8", "surrogateescape")
    args: list[bytes] = []
    word: bytearray | None = None
    i = 0
    while i < len(data):
        c = data[i:i + 1]
        if c in (b" ", b"\t"):
            if word is not None:
                args.append(bytes(word))
                word = None
            i += 1
            continue
        word = word if word is not None else bytearray()
        if c == b'"':
            i += 1
            while True:
                if i >= len(data):
                    raise AnalyzerError(f"unterminated double quote in: {text}")
                c = data[i:i + 1]
                if c == b'"':
                    i += 1
                    break
                if c == b"\\":
                    decoded, i = _c_unescape(data, i + 1, text)
                    word += decoded
                else:
                    word += c
                    i += 1
        elif c == b"'":
            end = data.find(b"'", i + 1)
            if end < 0:
                raise AnalyzerError(f"unterminated single quote in: {text}")
            word += data[i + 1:end]
            i = end + 1
        elif c == b"\\" and i + 1 < len(data):
            word += data[i + 1:i + 2]
            i += 2
        else:
            word += c
            i += 1
    if word is not None:
        args.append(bytes(word))
    return [arg.decode("utf-8", "surrogateescape") for arg in args]


def _c_unescape(data: bytes, i: int, text: str) -> tuple[bytes, int]:
    """One escape after a backslash at data[i]: returns the byte(s) and the next index."""
    c = chr(data[i]) if i < len(data) else ""
    if c in C_ESCAPES:
        return C_ESCAPES[c], i + 1
    if c == "x" and re.fullmatch(rb"[0-9a-fA-F]{2}", data[i + 1:i + 3]):
        return bytes([int(data[i + 1:i + 3], 16)]), i + 3
    if c in "01234567" and c and re.fullmatch(rb"[0-7]{3}", data[i:i + 3]):
        return bytes([int(data[i:i + 3], 8)]), i + 3
    if c in ("u", "U"):
        width = 4 if c == "u" else 8
        return chr(int(data[i + 1:i + 1 + width], 16)).encode(), i + 1 + width
    if c:
        return data[i:i + 1], i + 1  # any other escaped char stands for itself
    raise AnalyzerError(f"dangling backslash in: {text}")


def parse_exec_dump(lines: Iterable[str], unit_name: str) -> dict[str, list[list[str]]] | None:
    """Exec commands of `unit_name` from the debug unit dump, or None when it is not in there.

    The dump reads (tabs, arrow "->" or "→" depending on version and locale):
        -> Unit x.service:
                -> ExecStart:
                        Command Line: /usr/bin/printf "a b" c
    """
    commands: dict[str, list[list[str]]] | None = None
    in_unit = False
    directive = None
    for line in lines:
        unit = re.match(r"^\s*(?:->|→) Unit (\S+):$", line)
        if unit:
            in_unit = unit.group(1) == unit_name
            if in_unit and commands is None:
                commands = {}
            directive = None
            continue
        if not in_unit:
            continue
        header = re.match(r"^\s+(?:->|→) (Exec\w+):$", line)
        if header:
            directive = header.group(1)
            continue
        command = re.match(r"^\s+Command Line: (.*)$", line)
        if command and directive and commands is not None:
            commands.setdefault(directive, []).append(split_command_line(command.group(1)))
    return commands


def parse_calendar(rc: int, out: str) -> CalendarResult:
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    if rc != 0:
        return CalendarResult(False, None, [], "\n".join(lines) or f"exit status {rc}")
    normalized = None
    elapses: list[str] = []
    for line in lines:
        key, _, value = line.partition(": ")
        if key == "Normalized form":
            normalized = value
        elif key == "Next elapse" or key.startswith(("Iter. #", "Iteration #")):
            elapses.append(value)
        elif key == "(in UTC)" and elapses:  # printed when the local zone is not UTC
            elapses[-1] = value
    return CalendarResult(normalized is not None, normalized, elapses, None if normalized else "\n".join(lines))


# ---- finding analyzers ---------------------------------------------------------------------

def cache_dir() -> Path:
    """${JOBGEN_CACHE:-$HOME/.cache/jobgen}/systemd, where scripts/fetch-systemd-versions writes."""
    base = os.environ.get("JOBGEN_CACHE") or str(Path.home() / ".cache" / "jobgen")
    return Path(base) / "systemd"


@functools.lru_cache(maxsize=None)
def host_analyzer() -> Analyzer | None:
    """This machine's systemd-analyze with its major version, or None when not installed."""
    if not os.access(HOST_ANALYZER, os.X_OK):
        return None
    proc = subprocess.run([str(HOST_ANALYZER), "--version"], env=BASE_ENV, capture_output=True, text=True,
                          timeout=TIMEOUT)
    match = re.match(r"systemd (\d+)", proc.stdout)
    if proc.returncode != 0 or not match:
        return None
    unit_dir = next((d for d in HOST_UNIT_DIRS if d.is_dir() and not d.is_symlink()), HOST_UNIT_DIRS[-1])
    return Analyzer(version=int(match.group(1)), label=f"host systemd {match.group(1)}",
                    loader=(str(HOST_ANALYZER),), unit_dir=str(unit_dir))


def versioned_analyzer(major: int) -> Analyzer | None:
    """systemd-analyze of release `major` from the cache, or None when it was not fetched."""
    folder = cache_dir() / str(major)
    loader_file = folder / "loader"
    try:
        if not loader_file.is_file():
            return None
    except PermissionError:  # someone else's cache under a private $HOME
        return None
    loader = dict(line.split("=", 1) for line in loader_file.read_text().splitlines() if "=" in line)
    version = (folder / "version").read_text().strip() if (folder / "version").is_file() else str(major)
    return Analyzer(version=major, label=f"systemd {major} ({version})",
                    loader=(loader["ldso"], loader["library_path"], loader["systemd_analyze"]),
                    unit_dir=loader["unit_dir"], release=folder)


def cached_majors() -> list[int]:
    """Major versions present in the cache."""
    folder = cache_dir()
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit() and (p / "loader").is_file())


def missing_reason(major: int) -> str:
    suite = RELEASES.get(major, "the matching Debian suite")
    return f"systemd {major} not cached in {cache_dir()}: {FETCH_HINT} (Debian {suite})"
