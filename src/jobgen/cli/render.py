"""`jobgen render`: manifests -> unit files in a folder (atomic, deterministic).

`--check` and `--diff` are dry runs (as black's and kubectl's): they read the folder and
write nothing, not even the folder or its lock file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from jobgen.cli.answer import CliError, Format, build_all, check_holder, echo, emit_json, err, recovery_notes, resolve_target
from jobgen.cli.exits import EXIT_DRIFT, EXIT_OK, EXIT_OUTPUT
from jobgen.contract.oneline import one_line


def _inputs(manifests: list[Path]) -> dict[Path, bytes] | None:
    """Every manifest's bytes, read once: the cache key and the compile use the same
    bytes. None if one cannot be read (the compile reports it, with its place)."""
    from jobgen.compiler import limits

    try:
        return {path: limits.read_manifest(str(path)) for path in manifests}
    except OSError:
        return None


def _check_output(output: Path) -> None:
    """A relative -o needs a working folder that still exists (realpath asks for it)."""
    if not output.is_absolute():
        try:
            os.getcwd()
        except OSError as exc:
            raise CliError(f"cannot write {output}: the working folder is gone ({exc.strerror}); "
                           "give -o as an absolute path or run from a folder that exists; nothing written", EXIT_OUTPUT) from None


def _holder_check(chosen, output: Path, holder: str):
    """When the units go where systemd on this host reads them and --holder does not exist
    here: what adds a warning at each job that runs it (host.holder_warnings); else None.
    A render for other hosts or an image is not judged by this host's files."""
    import sys

    from jobgen.compiler import layout

    if not layout.read_by_this_host(chosen, os.path.realpath(output)):
        return None
    from jobgen.host import apply as host
    from jobgen.runtime import spawn

    if host.holder_present(holder, Path("/"), False):
        return None
    running = spawn.running_jobgen(sys.argv[0])
    return lambda result: host.holder_warnings(result, holder, Path("/"), False, running)


def _cache_problem() -> str | None:
    from jobgen.compiler import cache

    return cache.problem()


def _cache_key(manifests: list[Path], data: dict[Path, bytes], target, options: dict[str, object]) -> str:
    from jobgen.compiler import cache, resources

    chosen = None if target is None else [target.min, target.max, target.text]
    return cache.key(resources.code_digest(), [(str(p), data[p]) for p in manifests], {**options, "target": chosen})


def _from_cache(output: Path, key: str, folders: tuple[str, ...], prune_for, dry: bool, on_wait):
    """(entry, changes, recovery): ``changes`` when the cache knows what these inputs
    compile to and the folder holds exactly that, else None (compile); ``recovery``: what
    was found of an interrupted render (completed here unless ``dry``), or None."""
    from jobgen.compiler import cache, write

    entry = cache.lookup(output, key)
    if entry is None:
        return None, None, None
    with write.locked(output, folders, dry=dry, on_wait=on_wait) as recovery:
        # A dry run that sees a committed, unfinished render: the folder is not final yet.
        changes = None if recovery.pending else write.unchanged(output, entry.files, prune_for, folders)
    return entry, changes, recovery


def _both(first, then):
    """One account of what two passes under the lock found of an interrupted render."""
    if first is None:
        return then
    from jobgen.compiler import write

    return write.Recovery(completed=first.completed + then.completed, stale=first.stale + then.stale, pending=then.pending)


def render(manifests: list[Path], *, output: Path, holder: str, layout_name: str, systemd: Optional[str] = None,
           preset: Optional[str] = None, check: bool = False, diff: bool = False, prune: bool = False,
           fmt: Format = Format.text, quiet: bool = False, strict: bool = False, package: Optional[str] = None,
           no_cache: bool = False) -> int:
    """Render ``manifests`` into ``output`` (or compare with it: ``check``, ``diff``); the exit code."""
    from jobgen.compiler import layout, merge, write

    if layout_name not in layout.LAYOUTS:
        raise CliError(f"--layout {layout_name}: choose one of {', '.join(layout.LAYOUTS)}")
    chosen = layout.LAYOUTS[layout_name]
    try:
        layout.check_package(chosen, package)
    except layout.LayoutError as exc:
        raise CliError(f"{exc}; nothing written") from None
    check_holder(holder)
    target = resolve_target(systemd, preset)
    _check_output(output)
    try:
        merge.distinct_names(manifests)
    except merge.Clash as exc:
        raise CliError(f"{exc}; nothing written") from None
    prune_for = {p.name for p in manifests} if prune else None
    dry = check or diff
    folders = layout.folders(chosen)
    on_wait = lambda: err(f"jobgen: waiting for another render of {output}")  # noqa: E731
    # A missing holder is a fact of this host, not of the inputs: such a render compiles.
    more = _holder_check(chosen, output, holder)
    data = None if no_cache or more else _inputs(manifests)
    if data is not None and (untrusted := _cache_problem()):
        data = None  # compile, as with --no-cache, and say why once
        if not quiet:
            err(f"jobgen: note: render cache not used: {untrusted}; rendering without it")
    key = None
    if data is not None:
        options = {"holder": holder, "layout": layout_name, "package": package, "prune": prune, "strict": strict}
        key = _cache_key(manifests, data, target, options)
    try:
        entry, changes, earlier = _from_cache(output, key, folders, prune_for, dry, on_wait) if key else (None, None, None)
        if changes is not None:
            recovery = earlier
            diagnostics, targets, warning = entry.diagnostics, entry.targets, entry.warning
        else:
            too_long = lambda result: layout.name_problems(chosen, package, result.manifest)  # noqa: E731
            results = build_all(manifests, target, holder, fmt, strict, data, more, too_long)
            try:
                files = merge.merge(manifests, results)
            except merge.Clash as exc:
                raise CliError(f"{exc}; nothing written") from None
            warning = layout.unread_tmpfiles(chosen, os.path.realpath(output), files)
            try:
                files = layout.arrange(chosen, files, package)
            except layout.LayoutError as exc:
                raise CliError(f"{exc}; nothing written") from None
            with write.locked(output, folders, dry=dry, on_wait=on_wait) as recovery:
                changes = write.compare(output, files, prune_for, folders)
                if not dry:
                    write.apply(output, changes)
            recovery = _both(earlier, recovery)
            diagnostics = tuple(d for r in results for d in r.diagnostics)
            targets = tuple(r.plan.target.describe() for r in results)
            if key and not recovery.pending and (not dry or not any(c.changes_anything for c in changes)):
                _remember(output, key, files, diagnostics, targets, warning)
    except write.OutputError as exc:
        raise CliError(str(exc), EXIT_OUTPUT) from None
    if warning:
        err(f"jobgen: warning: {warning}")
    drift = recovery.pending or any(c.changes_anything for c in changes)
    notes = [str(d) for d in diagnostics]
    notes += [f"jobgen: note: {line}" for line in recovery_notes(output, recovery, dry, "render")]
    notes += [f"jobgen: note: {output / c.path} is masked (a symbolic link to /dev/null): left as it is" for c in changes if c.action == write.MASKED]
    if fmt == Format.json:
        doc = {
            "ok": True,
            "check": check,
            "dry_run": dry,
            "changed": drift,
            "targets": {str(p): t for p, t in zip(manifests, targets)},
            "files": [{"path": c.path, "action": c.action} for c in changes],
            "diagnostics": [d.as_json() for d in diagnostics],
            "recovered": {"pending": recovery.pending, "completed": recovery.completed, "stale": recovery.stale},
        }
        if diff:
            doc["diff"] = "".join(write.diff(c) for c in changes if c.changes_anything)
        emit_json(doc)
    else:
        for line in notes:
            if not quiet or ": note: " not in line:
                err(line)
        if shown := _file_lines(output, changes, dry, diff, quiet):
            echo(shown, nl=False)
    return EXIT_DRIFT if check and drift else EXIT_OK


def _file_lines(output: Path, changes: list, dry: bool, diff: bool, quiet: bool) -> str:
    """What happened to each file, one line per file whatever DIR holds, with its diff
    after it: one text, written at once (2,001 lines were 2,001 writes)."""
    from jobgen.compiler import write

    # str joins, not Path's: the same text as ``output / c.path`` (Path(".") / "x" is "x").
    base = str(output)
    prefix = "" if base == "." else os.path.join(base, "")
    said = []
    for c in changes:
        if not quiet:
            action = f"would {c.action}" if dry and c.changes_anything else c.action
            said.append(one_line(f"{action:9} {prefix}{c.path}") + "\n")
        if diff and c.changes_anything:
            said.append(write.diff(c))
    return "".join(said)


def register(app) -> None:
    """The typer command (imported here: a render recalled by recall.py runs without typer)."""
    import typer

    from jobgen.cli import completion, recall
    from jobgen.cli.app import EPILOG, FormatOpt, ManifestsArg, PresetOpt, QuietOpt, StrictOpt, SystemdOpt, a_path, holder_option

    @app.command("render", epilog=EPILOG)
    @recall.remembered("render")
    def _command(
        manifests: list[Path] = ManifestsArg,
        output: Path = typer.Option(..., "-o", "--output", metavar="DIR", parser=a_path, help="Folder to write the units into (created with mode 0755)."),
        systemd: Optional[str] = SystemdOpt,
        preset: Optional[str] = PresetOpt,
        check: bool = typer.Option(False, "--check", help="Dry run: write nothing; exit 1 if anything would change."),
        diff: bool = typer.Option(False, "--diff", help="Dry run: show a unified diff of every change; write nothing."),
        prune: bool = typer.Option(False, "--prune", help="Remove files whose header names one of these manifests and that are no longer generated."),
        fmt: Format = FormatOpt,
        holder: str = holder_option(),
        quiet: bool = QuietOpt,
        strict: bool = StrictOpt,
        layout_name: str = typer.Option("flat", "--layout", metavar="flat|etc|usr|debian", autocompletion=completion.layouts(), help="Where files go in the output folder (flat: for review; etc/usr: a root tree; debian: a debian/ folder for debhelper)."),
        package: Optional[str] = typer.Option(None, "--package", metavar="PKG", help="--layout debian: the binary package (debian/PKG.UNIT.service, debian/PKG.tmpfiles)."),
        no_cache: bool = typer.Option(False, "--no-cache", help="Compile even if the render cache says nothing changed, and do not update it (README: Render cache)."),
    ) -> None:
        """Render MANIFEST files into unit files in DIR (atomic, deterministic)."""
        raise typer.Exit(render(manifests, output=output, holder=holder, layout_name=layout_name, systemd=systemd, preset=preset, check=check, diff=diff,
                                prune=prune, fmt=fmt, quiet=quiet, strict=strict, package=package, no_cache=no_cache))


def _remember(output: Path, key: str, files: dict[str, bytes], diagnostics, targets, warning) -> None:
    from jobgen.compiler import cache

    digests = {rel: cache.digest(data) for rel, data in files.items()}
    cache.store(output, cache.Entry(key, digests, diagnostics, targets, warning))
