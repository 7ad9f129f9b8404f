"""`jobgen import-crontab`: a manifest from a crontab; lines it cannot translate faithfully are reported."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

import typer

from jobgen.cli.app import err
from jobgen.cli.exits import EXIT_INTERNAL, EXIT_INVALID

# Some lines were not translated: the manifest holds the others.
EXIT_PARTIAL = 1


def _write(path: Path, text: str) -> None:
    """Atomically: a temporary file beside it, then rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def import_crontab(crontab: Path, *, output: Optional[Path] = None, user: Optional[str] = None,
                   system: Optional[bool] = None, force: bool = False) -> int:
    """Translate ``crontab`` into a manifest on stdout or in ``output``; the exit code."""
    from jobgen.compiler.diagnostics import ManifestError
    from jobgen.tools import crontab as tool

    try:
        text = crontab.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        err(f"jobgen: error: {crontab}: cannot read: {exc}")
        return EXIT_INVALID
    if output is not None and output.exists() and not force:
        err(f"jobgen: error: {output} exists; pass --force to overwrite it")
        return EXIT_INVALID
    is_system = tool.system_format(str(crontab)) if system is None else system
    imported = tool.read(text, crontab.name, system=is_system, user=user, is_user=_is_user if system is None else None)
    try:  # a job the validator refuses is reported by line; any other refusal is jobgen's bug
        result = tool.settle(imported, crontab.name, str(output or "<import>"))
    except ManifestError as exc:
        err(f"jobgen: internal error: the imported manifest does not validate:\n{exc}")
        return EXIT_INTERNAL
    for note in imported.notes:
        err(f"{crontab}:{note.line}: note: {note.message}")
    for problem in sorted(imported.problems, key=lambda p: p.line):
        err(f"{crontab}:{problem.line}: error: {problem.message}")
    if output is None:
        typer.echo(result, nl=False)
    else:
        _write(output, result)
    n = len(imported.problems)
    err(f"jobgen: {len(imported.jobs)} job{'s' if len(imported.jobs) != 1 else ''} imported"
        + (f"; {n} line{'s' if n != 1 else ''} not translated" if n else ""))
    # Nothing imported is not a migration done, even from a file of comments alone.
    return EXIT_PARTIAL if n or not imported.jobs else 0


def register(app: typer.Typer) -> None:
    @app.command("import-crontab")
    def _command(
        crontab: Path = typer.Argument(..., metavar="FILE", help="A crontab: /etc/crontab, a file of /etc/cron.d, or a user crontab."),
        output: Optional[Path] = typer.Option(None, "-o", "--output", metavar="MANIFEST", help="Write the manifest here (default: standard output)."),
        user: Optional[str] = typer.Option(None, "--user", help="Owner of a user crontab (its jobs get user: NAME)."),
        system: Optional[bool] = typer.Option(None, "--system/--user-crontab", help="Whether lines have a user column (default: /etc/crontab and cron.d files do)."),
        force: bool = typer.Option(False, "--force", help="Overwrite MANIFEST if it exists."),
    ) -> None:
        """Translate a crontab into a manifest; untranslatable lines are reported with their line number."""
        raise typer.Exit(import_crontab(crontab, output=output, user=user, system=system, force=force))


def _is_user(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except (KeyError, UnicodeEncodeError):
        return False
    return True
