"""`jobgen import-crontab`: a manifest from a crontab; lines it cannot translate faithfully are reported."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from jobgen.cli.answer import err
from jobgen.cli.exits import EXIT_INTERNAL, EXIT_INVALID, EXIT_OK, EXIT_OUTPUT

# Some lines were not translated: the manifest holds the others.
EXIT_PARTIAL = 1


def _write(path: Path, text: str) -> int:
    """Write the one manifest by the compiler's write rules (compiler/write.py: atomic,
    under the folder's lock, one line and nothing written on failure); the exit code."""
    from jobgen.compiler import write

    folder = path.parent
    if not folder.is_dir():  # made by no one but the operator: a typo must not scatter manifests
        what = "does not exist" if not os.path.lexists(folder) else "is not a folder"
        err(f"jobgen: error: cannot write {path}: {folder} {what}; nothing written")
        return EXIT_OUTPUT
    try:
        with write.locked(folder, ("",), dry=False) as _:
            write.apply(folder, write.compare(folder, {path.name: text.encode()}))
    except write.OutputError as exc:
        err(f"jobgen: error: {exc}; nothing written")
        return EXIT_OUTPUT
    return EXIT_OK


def import_crontab(crontab: Optional[Path], *, output: Optional[Path] = None, host: bool = False,
                   root: Optional[Path] = None, zone: Optional[str] = None, user: Optional[str] = None,
                   system: Optional[bool] = None, force: bool = False, cron: Optional[str] = None) -> int:
    """Translate ``crontab`` (or, with ``host``, every source of the host's cron) into manifests; the exit code."""
    from jobgen.compiler.diagnostics import ManifestError
    from jobgen.host import crontabs as host_cron
    from jobgen.tools import crontab as tool
    from jobgen.tools import crontab_dst

    if zone is not None and (why := _zone_problem(zone)):
        err(f"jobgen: error: --zone {zone}: {why}")
        return EXIT_INVALID
    if cron is not None and cron not in host_cron.FLAVOURS:
        err(f"jobgen: error: --cron {cron}: choose one of {', '.join(host_cron.FLAVOURS)}")
        return EXIT_INVALID
    if host or root is not None:
        return import_host(crontab, output, root, zone, force, host, user, system, cron)
    if crontab is None:
        err("jobgen: error: give a crontab FILE, or --host for the whole host's cron")
        return EXIT_INVALID
    if cron is None and (why := _unread_rules(Path("/"))):
        err(why)
        return EXIT_INVALID
    stdin = str(crontab) == "-"  # as crontab(1) reads one: `crontab -l | jobgen import-crontab -`
    try:
        text = _read_crontab(None if stdin else crontab).decode("utf-8")
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        err(f"jobgen: error: {crontab}: cannot read: {exc}")
        return EXIT_INVALID
    if stdin:
        crontab = Path("stdin")  # the name its jobs are called by, and the one its lines are reported under
    if output is not None and output.exists() and not force:
        err(f"jobgen: error: {output} exists; pass --force to overwrite it")
        return EXIT_INVALID
    is_system = tool.system_format(str(crontab)) if system is None else system
    # The rules of the cron that read it: this host's, unless --cron names another.
    flavour = host_cron.FLAVOURS[cron or host_cron.image_flavour(Path("/"))]
    imported = tool.read(text, crontab.name, system=is_system, user=user, is_user=_is_user if system is None else None,
                         acts_on=flavour.acts_on, whole_file=flavour.whole_file, context=tool.Context(_home, os.path.isdir))
    try:  # a job the validator refuses is reported by line; any other refusal is jobgen's bug
        result = tool.settle(imported, crontab.name, str(output or "<import>"))
    except ManifestError as exc:
        err("jobgen: internal error: the imported manifest does not validate:")
        for d in exc.diagnostics:
            err(str(d))
        return EXIT_INTERNAL
    zone = zone or host_cron.host_zone(Path("/"))
    for note in imported.notes:
        err(f"{crontab}:{note.line}: note: {note.message}")
    if not is_system and user is None and imported.jobs:
        # cron runs a user crontab's jobs as its owner; a job without user: runs as root.
        err(f"{crontab}:{imported.jobs[0].line}: note: no --user: these jobs get no user: and run as root, while cron "
            "ran a user crontab's jobs as the user it belongs to; pass --user NAME to keep that")
    for job in imported.jobs:  # per line, what its zone's DST changes do differently
        job_zone = job.timezone or zone
        if job_zone and not isinstance(job.schedule, dict) and crontab_dst.has_dst(job_zone):
            for difference in crontab_dst.differences(job.cron_schedule, job.schedule, job_zone):
                err(f"{crontab}:{job.line}: note: {difference}")
    for problem in sorted(imported.problems, key=lambda p: p.line):
        err(f"{crontab}:{problem.line}: error: {problem.message}")
    if output is None:
        typer.echo(result, nl=False)
    elif (code := _write(output, result)) != EXIT_OK:
        return code
    n = len({problem.line for problem in imported.problems})  # lines, not problems: a line can have two
    err(f"jobgen: {len(imported.jobs)} job{'s' if len(imported.jobs) != 1 else ''} imported"
        + (f"; {n} line{'s' if n != 1 else ''} not translated" if n else ""))
    # Nothing imported is not a migration done, even from a file of comments alone.
    return EXIT_PARTIAL if n or not imported.jobs else 0


def register(app: typer.Typer) -> None:
    from jobgen.cli.app import a_path

    @app.command("import-crontab")
    def _command(
        crontab: Optional[Path] = typer.Argument(None, metavar="FILE", help="A crontab: /etc/crontab, a file of /etc/cron.d, or a user crontab; - for standard input."),
        output: Optional[Path] = typer.Option(None, "-o", "--output", metavar="MANIFEST|FOLDER", parser=a_path, help="Write the manifest here (default: standard output); with --host, the folder the manifests go into (default: the current one)."),
        host: bool = typer.Option(False, "--host", help="Import the whole host's cron: /etc/crontab, /etc/cron.d, the run-parts folders, /etc/anacrontab and the user crontabs, one manifest per source."),
        root: Optional[Path] = typer.Option(None, "--root", metavar="DIR", parser=a_path, help="With --host: read the cron configuration of the image whose root is DIR."),
        zone: Optional[str] = typer.Option(None, "--zone", metavar="ZONE", help="The time zone jobs without CRON_TZ run in, for the DST report (default: the host's)."),
        user: Optional[str] = typer.Option(None, "--user", help="Owner of a user crontab (its jobs get user: NAME)."),
        system: Optional[bool] = typer.Option(None, "--system/--user-crontab", help="Whether lines have a user column (default: /etc/crontab and cron.d files do)."),
        force: bool = typer.Option(False, "--force", help="Overwrite MANIFEST if it exists."),
        cron: Optional[str] = typer.Option(None, "--cron", metavar="debian|cronie", help="Whose rules the crontab was read by: Debian's cron (CRON_TZ does not change when jobs run) or cronie (it does; RHEL, Fedora). Default: the cron of this host, or with --root of the image; where that is systemd-cron, whose rules differ from both, this option must say which."),
    ) -> None:
        """Translate a crontab into a manifest; untranslatable lines are reported with their line number."""
        raise typer.Exit(import_crontab(crontab, output=output, host=host, root=root, zone=zone, user=user,
                                        system=system, force=force, cron=cron))


def import_host(crontab: Optional[Path], output: Optional[Path], root: Optional[Path], zone: Optional[str],
                force: bool, host: bool, user: Optional[str] = None, system: Optional[bool] = None,
                cron_name: Optional[str] = None) -> int:
    """--host: every source of the host's cron, one manifest each, one report; the exit code."""
    from jobgen.compiler import write
    from jobgen.host import crontabs as host_cron
    from jobgen.host.apply import root_problem
    from jobgen.tools import crontab_host

    if crontab is not None or not host or user is not None or system is not None:
        err("jobgen: error: --host reads the host's crontabs itself: give either FILE or --host" if crontab is not None
            else "jobgen: error: --root DIR reads an image's crontabs: give --host too" if not host
            else "jobgen: error: --host takes each crontab's user and format from where it is: drop --user, --system and --user-crontab")
        return EXIT_INVALID
    root = root or Path("/")
    if why := root_problem(root):
        err(f"jobgen: error: --root {root}: {why}")
        return EXIT_INVALID
    if cron_name is None and (why := _unread_rules(root)):
        err(why)
        return EXIT_INVALID
    folder = output or Path(".")
    if not folder.is_dir():  # made by no one but the operator: a typo must not scatter manifests
        what = "does not exist" if not os.path.lexists(folder) else "is not a folder"
        err(f"jobgen: error: cannot write {folder}: it {what}; nothing written")
        return EXIT_OUTPUT
    cron = host_cron.read_host(root, cron_name)
    result = crontab_host.import_host(cron, zone or cron.zone)
    files = {name: text.encode() for name, text in result.files.items()}
    try:
        with write.locked(folder, ("",), dry=False) as _:
            changes = write.compare(folder, files)
            if not force and (kept := [c.path for c in changes if c.action == write.UPDATE]):
                err(f"jobgen: error: {folder / kept[0]} exists and differs; pass --force to overwrite it; nothing written")
                return EXIT_INVALID
            write.apply(folder, changes)
    except write.OutputError as exc:
        err(f"jobgen: error: {exc}; nothing written")
        return EXIT_OUTPUT
    for line in result.report:
        typer.echo(line)
    err(f"jobgen: {result.jobs} job{'s' if result.jobs != 1 else ''} imported into {len(files)} "
        f"manifest{'s' if len(files) != 1 else ''} in {folder}"
        + (f"; {result.refused} refused" if result.refused else ""))
    return EXIT_PARTIAL if result.refused or not result.jobs else EXIT_OK


def _unread_rules(root: Path) -> str | None:
    """The error when the cron of ROOT reads crontabs by rules jobgen does not read them by
    (systemd-cron: host/crontabs.SYSTEMD_CRON_LINES): no guess, --cron says whose."""
    from jobgen.host import crontabs as host_cron

    if (found := host_cron.systemd_cron(root)) is None:
        return None
    where, line, differs = found
    what = "this host's" if str(root) == "/" else "the image's"
    return (f"jobgen: error: {what} cron is systemd-cron{' ' + line if line else ''} ({where}), which reads crontabs by "
            f"rules of its own: {differs}; jobgen reads them by Debian's cron's or cronie's rules only: pass --cron "
            "debian or --cron cronie to read them by those, then review each job (README: systemd-cron); nothing written")


def _read_crontab(path: Optional[Path]) -> bytes:
    """The bytes of a crontab FILE (None: standard input), at most host/crontabs.py's
    MAX_BYTES: ValueError for a device or a file larger than that (/dev/zero would fill
    memory). O_NONBLOCK for the open alone: a FIFO nobody writes must not hang the import
    (it reads as empty), while `<(crontab -l)`, a pipe, is still read to its end."""
    import stat

    from jobgen.host.crontabs import MAX_BYTES

    if path is None:
        fd = sys.stdin.fileno()
    else:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if path is not None:
            if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
                raise ValueError("not a regular file" + (": a folder" if stat.S_ISDIR(mode) else ""))
            os.set_blocking(fd, True)
        chunks, size = [], 0
        while chunk := os.read(fd, MAX_BYTES + 1 - size):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_BYTES:
                raise ValueError(f"more than {MAX_BYTES:,} bytes, larger than any crontab an operator wrote")
        return b"".join(chunks)
    finally:
        if path is not None:
            os.close(fd)


def _zone_problem(zone: str) -> str | None:
    from jobgen.compiler import timespec

    return None if timespec.timezone_is_valid(zone) else "not a time zone jobgen knows"


def _home(name: str) -> str | None:
    """A user's home folder on this host (a FILE is read as this host's cron reads it)."""
    from jobgen.host.crontabs import host_account

    return account.pw_dir if (account := host_account(name)) is not None else None


def _is_user(name: str) -> bool:
    from jobgen.host.crontabs import host_account

    return host_account(name) is not None
