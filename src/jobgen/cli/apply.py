"""`jobgen apply`: render manifests and install them on this host (or into an image root).

The interface is agreed in the apply contract (README: Deploying): exit 0 applied or nothing
to do, 1 --check found changes, 2 invalid manifest or usage, 3 applied but a unit failed
(named), 4 refused (not root, no systemd, a file jobgen did not write): nothing changed,
73 the files could not be written (a read-only or full file system): none was changed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from jobgen.cli import completion
from jobgen.cli.answer import Format, emit_json, err, holder_problem, recovery_notes, resolve_target
from jobgen.cli.app import FormatOpt, PresetOpt, QuietOpt, StrictOpt, a_path, holder_option
from jobgen.contract.oneline import one_line
from jobgen.cli.exits import APPLY_OUTCOMES, EXIT_DRIFT, EXIT_INVALID, EXIT_OK, EXIT_OUTPUT, EXIT_PARTIAL, EXIT_REFUSED
from jobgen.contract.locks import DEFAULT_HOLDER

LAYOUTS = ("etc", "usr")  # apply installs where systemd reads; flat is for review (render)


def _doc(code: int, **kw) -> dict:
    """The --format json answer of an apply that exits ``code``, with what that code means."""
    doc = {"format": 1, "ok": True, "check": False, "changed": False, "files": [], "actions": [], "diagnostics": [], "errors": [],
           "exit_code": code, "outcome": APPLY_OUTCOMES[code]}
    doc.update(kw)
    return doc


def apply(manifests: list[Path], *, layout_name: str, restart: str, stop_timeout: float, root: Optional[Path] = None,
          check: bool = False, diff: bool = False, systemd: Optional[str] = None, preset: Optional[str] = None,
          fmt: Format = Format.text, holder: Optional[str] = None, quiet: bool = False, strict: bool = False) -> int:
    """Install ``manifests`` on this host or into ``root`` (or say what would change: ``check``, ``diff``); the exit code."""
    from jobgen.compiler import layout, merge, pipeline
    from jobgen.compiler.diagnostics import NOTE, WARNING, ManifestError
    from jobgen.host import apply as host
    from jobgen.runtime import spawn

    json_out = fmt == Format.json
    dry = check or diff

    def fail(code: int, errors: list[str], diagnostics: list | None = None) -> int:
        if json_out:
            emit_json(_doc(code, ok=False, check=check, errors=errors, diagnostics=[d.as_json() for d in diagnostics or []]))
        else:
            for d in diagnostics or []:
                err(str(d))
            for line in errors:
                err(f"jobgen: error: {line}")
        return code

    if layout_name not in LAYOUTS:
        return fail(EXIT_INVALID, [f"--layout {layout_name}: apply installs with etc or usr (flat is for review: jobgen render)"])
    if restart not in ("changed", "never"):
        return fail(EXIT_INVALID, [f"--restart {restart}: choose changed or never"])
    if not stop_timeout >= 0:  # NaN too: no run would be waited for (every comparison with it is false)
        return fail(EXIT_INVALID, ["--stop-timeout must be 0 or more seconds"])
    # render's rules for names and files (compiler/merge.py): the same file given
    # twice is one manifest; two files of one name, or two manifests that generate one
    # file differently, are refused, naming both.
    try:
        merge.distinct_names(manifests)
    except merge.Clash as exc:
        return fail(EXIT_INVALID, [f"{exc}; nothing changed"])
    where = host.Where(root or Path("/"), layout.LAYOUTS[layout_name], image=root is not None)
    if root is not None and (why := host.root_problem(root)):
        return fail(EXIT_INVALID, [f"--root {root}: {why}"])
    if problem := host.host_problem(where, dry):
        return fail(EXIT_REFUSED, [problem])

    # On this host the units exec the jobgen that runs now; an image gets the packaged path.
    running = None if root is not None else spawn.running_jobgen(sys.argv[0])
    holder = holder or running or DEFAULT_HOLDER
    if why := holder_problem(holder):
        return fail(EXIT_INVALID, [f"{why}; nothing changed"])
    target = resolve_target(systemd if systemd is not None or preset is not None or root is not None else "auto", preset)
    results, problems = [], []
    for path in manifests:
        try:
            results.append(pipeline.build(str(path), target, holder))
        except ManifestError as exc:
            problems += exc.diagnostics
    if problems:
        return fail(EXIT_INVALID, [f"{sum(d.severity == 'error' for d in problems)} error(s) in the manifests; nothing changed"], problems)
    results = [host.holder_warnings(r, holder, where.root, where.image, running) for r in results]
    notes = [d for r in results for d in r.diagnostics]
    if target is None and any(d.message.startswith("no target systemd given") for d in notes):
        return fail(EXIT_INVALID, ["--root: give --systemd VERSION (the image's systemd) or target: in the manifest"], notes)
    warnings = sorted(d for d in notes if d.severity == WARNING)
    if strict and warnings:
        return fail(EXIT_INVALID, [f"{len(warnings)} warning{'s' if len(warnings) != 1 else ''} with --strict; nothing changed"], warnings)

    try:
        merged = merge.merge(manifests, results)
    except merge.Clash as exc:
        return fail(EXIT_INVALID, [f"{exc}; nothing changed"])
    desired = layout.arrange(where.layout, merged)
    # Which manifest each file is from: read_tree refuses to replace a file another
    # manifest (or no jobgen) wrote.
    made_by = {name: path.name for path, result in zip(manifests, results)
               for name in layout.arrange(where.layout, result.files)}

    # Checked before the lock is taken in it: its file is never made through a link.
    if refused := host.outside(where, desired):
        return fail(EXIT_REFUSED, [*refused, "nothing changed"])
    from jobgen.compiler import write

    base = where.root / host.lock_folder(where)
    on_wait = lambda: err(f"jobgen: waiting for another apply to {where.root}")  # noqa: E731
    try:
        with host.locked(where, dry=dry, on_wait=on_wait) as recovery:
            result = _locked_apply(host, where, desired, made_by, restart, stop_timeout, dry)
    except write.OutputError as exc:
        return fail(EXIT_OUTPUT, [f"{exc}; the installed files are left as they were"])
    if not json_out and not quiet:
        for line in recovery_notes(base, recovery, dry, "apply"):
            err(f"jobgen: note: {line}")
    if isinstance(result, list):  # refusals
        return fail(EXIT_REFUSED, [*result, "nothing changed"])
    the_plan, outcome = result
    failed: list[str] = []
    steps = the_plan.steps
    if outcome is not None:
        steps, failed = outcome.done, outcome.failed
        if outcome.unwritten:
            # No file was changed (one transaction); what ran before the files (a removed
            # job's stop and disable) is listed, as it did change the host.
            if not json_out and not quiet:
                for s in steps:
                    typer.echo(one_line(f"{'ran':9} {' '.join(s.argv)}  # {s.why}"))
            shown_notes = notes if json_out or not quiet else [d for d in notes if d.severity != NOTE]
            return fail(EXIT_OUTPUT, [*failed, f"{outcome.unwritten}; the installed files are left as they were"], shown_notes)
    shown = lambda rel: one_line(str(where.root / rel))  # noqa: E731 - one line per file, whatever --root holds
    # A dry run that saw an unfinished earlier apply: the files are not final yet.
    changed = the_plan.changed or recovery.pending
    code = EXIT_PARTIAL if failed else EXIT_DRIFT if check and changed else EXIT_OK
    if json_out:
        doc = _doc(
            code,
            ok=not failed,
            check=check,
            changed=changed,
            files=[{"path": shown(f.path), "action": f.action} for f in the_plan.files],
            actions=[{"argv": list(s.argv), "why": s.why} for s in steps],
            diagnostics=[d.as_json() for d in notes],
            errors=failed,
        )
        if diff:
            doc["diff"] = "".join(_diff(f) for f in the_plan.files if f.changes_anything)
        emit_json(doc)
    else:
        for d in notes:
            if not quiet or d.severity != NOTE:
                err(str(d))
        for f in the_plan.files:
            verb = f"would {f.action}" if dry and f.changes_anything else f.action
            if not quiet:
                typer.echo(f"{verb:9} {shown(f.path)}")
            if diff and f.changes_anything:
                typer.echo(_diff(f), nl=False)
        for s in steps if not quiet else ():
            typer.echo(one_line(f"{'would run' if dry else 'ran':9} {' '.join(s.argv)}  # {s.why}"))
        for line in failed:
            err(f"jobgen: error: {line}")
        if not changed and not quiet:
            typer.echo("nothing to do")
    return code


def _locked_apply(host, where, desired: dict[str, bytes], made_by: dict[str, str], restart: str, stop_timeout: float, dry: bool):
    """Read, plan and (unless ``dry``) carry out, under the root's lock: the refusals, or
    (plan, outcome); outcome None when ``dry``."""
    existing, refused = host.read_tree(where, desired, made_by)
    if refused:
        return refused
    state = host.query_state(where, host.units_to_ask(desired, existing), host.units_loaded_from(desired, existing))
    the_plan = host.plan_apply(where, desired, existing, state, restart)
    return the_plan, None if dry else host.execute(where, the_plan, stop_timeout)


def register(app: typer.Typer) -> None:
    @app.command("apply")
    def _command(
        manifests: list[Path] = typer.Argument(..., metavar="MANIFEST", help="Manifest files."),
        root: Optional[Path] = typer.Option(None, "--root", metavar="DIR", parser=a_path, help="Install into an image root: no running systemd is touched; enabling makes the .wants/ links (systemctl --root)."),
        layout_name: str = typer.Option("etc", "--layout", metavar="etc|usr", autocompletion=completion.layouts(LAYOUTS), help="etc: /etc/systemd/system + /etc/tmpfiles.d; usr: /usr/lib/systemd/system + /usr/lib/tmpfiles.d."),
        check: bool = typer.Option(False, "--check", help="Change nothing; list the file changes and actions; exit 1 if anything would change."),
        diff: bool = typer.Option(False, "--diff", help="Change nothing; show a unified diff of every file change and the actions."),
        restart: str = typer.Option("changed", "--restart", metavar="changed|never", help="Restart running workers whose units changed (gracefully: SIGTERM, then stop_timeout)."),
        stop_timeout: float = typer.Option(300.0, "--stop-timeout", metavar="SECONDS", help="How long a removed job's run in progress is waited for before it is stopped."),
        systemd: Optional[str] = typer.Option(None, "--systemd", help="Target systemd version; default: this host's (auto). With --root: give it (or --target), or set target: in the manifest."),
        preset: Optional[str] = PresetOpt,
        fmt: Format = FormatOpt,
        holder: Optional[str] = holder_option("the jobgen that is running; with --root, /usr/bin/jobgen"),
        quiet: bool = QuietOpt,
        strict: bool = StrictOpt,
    ) -> None:
        """Install manifests where systemd reads them: write, reload, enable, start; remove what was dropped."""
        raise typer.Exit(apply(manifests, layout_name=layout_name, restart=restart, stop_timeout=stop_timeout, root=root, check=check,
                               diff=diff, systemd=systemd, preset=preset, fmt=fmt, holder=holder, quiet=quiet, strict=strict))



def _diff(f) -> str:
    import difflib

    old = (f.old or b"").decode("utf-8", "replace").splitlines(keepends=True)
    new = (f.new or b"").decode("utf-8", "replace").splitlines(keepends=True)
    before = f"a/{f.path}" if f.old is not None else "/dev/null"
    after = f"b/{f.path}" if f.new is not None else "/dev/null"
    return "".join(difflib.unified_diff(old, new, before, after))
