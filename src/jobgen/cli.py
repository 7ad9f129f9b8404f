"""The command line: the only module that prints or exits.

Exit codes (README "Exit codes"): 0 ok; 1 `--check` found drift; 2 invalid manifest or
usage; 75 lock conflict (`run`, `lock`); others from the job or the lock holder.
"""

import json
import os
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

EXIT_OK, EXIT_DRIFT, EXIT_INVALID = 0, 1, 2


def main() -> None:
    argv = sys.argv[1:]
    # `jobgen lock` runs in front of every cluster-scope job: keep its start-up lean
    # (no typer, no jinja2) and its argument handling its own.
    if argv[:1] == ["lock"]:
        from jobgen.runtime import lock as holder

        sys.exit(holder.main(argv[1:]))
    _app()()


def _app():  # noqa: C901 - the command table, kept in one place
    import typer

    from jobgen import __version__
    from jobgen.compiler import pipeline, plan, write
    from jobgen.compiler.diagnostics import ManifestError
    from jobgen.compiler.target import parse_target, parse_systemctl_version, supported_directives

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True, help="Compile a YAML job manifest into systemd units.")

    class Format(str, Enum):
        text = "text"
        json = "json"

    def err(line: str) -> None:
        typer.echo(line, err=True)

    def version_cb(value: bool) -> None:
        if value:
            typer.echo(f"jobgen {__version__}")
            raise typer.Exit(EXIT_OK)

    @app.callback()
    def _root(
        version: bool = typer.Option(False, "--version", callback=version_cb, is_eager=True, help="Print the version and exit."),
    ) -> None:
        pass

    def resolve_target(systemd: Optional[str], preset: Optional[str]):
        if systemd and preset:
            err("jobgen: error: give --systemd or --target, not both")
            raise typer.Exit(EXIT_INVALID)
        text = preset or systemd
        if text is None:
            return None
        if text == "auto":
            try:
                out = subprocess.run(["systemctl", "--version"], capture_output=True, text=True, timeout=10).stdout
                text = str(parse_systemctl_version(out))
            except (OSError, subprocess.SubprocessError, ValueError) as exc:
                err(f"jobgen: error: --systemd auto: cannot read `systemctl --version`: {exc}")
                raise typer.Exit(EXIT_INVALID)
        try:
            return parse_target(text)
        except ValueError as exc:
            err(f"jobgen: error: --{'target' if preset else 'systemd'} {text}: {exc}")
            raise typer.Exit(EXIT_INVALID)

    def build_all(manifests: list[Path], target, holder: str, fmt: Format):
        results, problems = [], []
        for path in manifests:
            try:
                results.append(pipeline.build(str(path), target, holder))
            except ManifestError as exc:
                problems += exc.diagnostics
        if problems:
            if fmt == Format.json:
                typer.echo(json.dumps({"ok": False, "diagnostics": [d.as_json() for d in problems]}, indent=2, sort_keys=True))
            else:
                for d in problems:
                    err(str(d))
                n = sum(1 for d in problems if d.severity == "error")
                err(f"jobgen: {n} error{'s' if n != 1 else ''}; nothing written")
            raise typer.Exit(EXIT_INVALID)
        return results

    SystemdOpt = typer.Option(None, "--systemd", help="Target systemd: a version (252), a range ('>=252,<258') or 'auto' (this host).")
    PresetOpt = typer.Option(None, "--target", help="Target distribution preset, e.g. debian-12, ubuntu-24.04, rhel-9.")
    FormatOpt = typer.Option(Format.text, "--format", help="Output format.")
    HolderOpt = typer.Option(plan.DEFAULT_HOLDER, "--holder", help="Path of jobgen on the target hosts (cluster-scope jobs run `jobgen lock`).")

    @app.command()
    def render(
        manifests: list[Path] = typer.Argument(..., help="Manifest files."),
        output: Path = typer.Option(..., "-o", "--output", help="Folder to write the units into."),
        systemd: Optional[str] = SystemdOpt,
        preset: Optional[str] = PresetOpt,
        check: bool = typer.Option(False, "--check", help="Write nothing; exit 1 if anything would change."),
        diff: bool = typer.Option(False, "--diff", help="Show a unified diff of every change."),
        prune: bool = typer.Option(False, "--prune", help="Remove files jobgen wrote from these manifests that are no longer generated."),
        fmt: Format = FormatOpt,
        holder: str = HolderOpt,
    ) -> None:
        """Render manifests into unit files (atomic, deterministic)."""
        target = resolve_target(systemd, preset)
        # A generated file's header names its manifest by file name (so bytes do not depend
        # on where the manifest was checked out); --prune and the tmpfiles.d file rely on
        # that name, so manifests rendered together must have distinct file names.
        seen: dict[str, Path] = {}
        for path in manifests:
            if path.name in seen and seen[path.name].resolve() != path.resolve():
                err(f"jobgen: error: {seen[path.name]} and {path} have the same file name; rename one (generated files name their manifest by file name); nothing written")
                raise typer.Exit(EXIT_INVALID)
            seen[path.name] = path
        results = build_all(manifests, target, holder, fmt)
        files: dict[str, bytes] = {}
        owners: dict[str, str] = {}
        for path, result in zip(manifests, results):
            for name, data in result.files.items():
                if name in files and files[name] != data:
                    err(f"jobgen: error: {name} is generated by both {owners[name]} and {path}; nothing written")
                    raise typer.Exit(EXIT_INVALID)
                files[name], owners[name] = data, str(path)
        prune_for = {p.name for p in manifests} if prune else None
        changes = write.compare(output, files, prune_for)
        drift = any(c.changes_anything for c in changes)
        if not check:
            write.apply(output, changes)
        notes = [d for r in results for d in r.diagnostics]
        if fmt == Format.json:
            doc = {
                "ok": True,
                "check": check,
                "changed": drift,
                "targets": {str(p): r.plan.target.describe() for p, r in zip(manifests, results)},
                "files": [{"path": c.path, "action": c.action} for c in changes],
                "diagnostics": [d.as_json() for d in notes],
            }
            if diff:
                doc["diff"] = "".join(write.diff(c) for c in changes if c.changes_anything)
            typer.echo(json.dumps(doc, indent=2, sort_keys=True))
        else:
            for d in notes:
                err(str(d))
            for c in changes:
                typer.echo(f"{c.action:9} {output / c.path}")
                if diff and c.changes_anything:
                    typer.echo(write.diff(c), nl=False)
        raise typer.Exit(EXIT_DRIFT if check and drift else EXIT_OK)

    @app.command()
    def check(
        manifests: list[Path] = typer.Argument(..., help="Manifest files."),
        systemd: Optional[str] = SystemdOpt,
        preset: Optional[str] = PresetOpt,
        fmt: Format = FormatOpt,
    ) -> None:
        """Validate and lint manifests; writes nothing."""
        results = build_all(manifests, resolve_target(systemd, preset), plan.DEFAULT_HOLDER, fmt)
        notes = [d for r in results for d in r.diagnostics]
        if fmt == Format.json:
            typer.echo(json.dumps({"ok": True, "diagnostics": [d.as_json() for d in notes]}, indent=2, sort_keys=True))
        else:
            for d in notes:
                err(str(d))
            for path, r in zip(manifests, results):
                typer.echo(f"{path}: ok ({len(r.files)} files for {r.plan.target.describe()})")

    @app.command()
    def run(
        manifest: Path = typer.Argument(..., help="Manifest file."),
        job: str = typer.Argument(..., help="Job name."),
        systemd: Optional[str] = SystemdOpt,
        holder: str = typer.Option(sys.argv[0] if os.path.isabs(sys.argv[0]) else plan.DEFAULT_HOLDER, "--holder", help="jobgen executable for cluster locks."),
    ) -> None:
        """Run a job now, through the same lock and argv as its unit."""
        (result,) = build_all([manifest], resolve_target(systemd, None), holder, Format.text)
        spec = result.plan.runs.get(job)
        if spec is None:
            err(f"jobgen: error: {manifest}: no job '{job}'; jobs: {', '.join(sorted(result.plan.runs)) or 'none'}")
            raise typer.Exit(EXIT_INVALID)
        argv = list(spec.argv)
        if os.geteuid() == 0 and spec.user:
            # The unit runs as User=/Group=; a root shell gets the same identity.
            ids = [f"--reuid={spec.user}", f"--regid={spec.group or spec.user}", "--init-groups"]
            argv = ["/usr/bin/setpriv", *ids, "--", *argv]
        env = dict(os.environ) | dict(spec.environment)
        try:
            code = subprocess.call(argv, env=env, cwd=spec.working_directory)
        except OSError as exc:
            err(f"jobgen: error: cannot start {argv[0]}: {exc.strerror}")
            raise typer.Exit(127)
        if code == plan.CONFLICT_EXIT:
            err(f"jobgen: {job}: skipped: another run holds the lock (exit {code})")
        elif code < 0:
            code = 128 - code  # killed by a signal: the shell's convention
        raise typer.Exit(code)

    @app.command()
    def directives(
        systemd: Optional[str] = SystemdOpt,
        preset: Optional[str] = PresetOpt,
        fmt: Format = FormatOpt,
    ) -> None:
        """List the directives jobgen emits and whether the target supports them."""
        from jobgen.compiler.plan import DEFAULT_TARGET, EMITTED, FALLBACKS

        target = resolve_target(systemd, preset) or parse_target(DEFAULT_TARGET)
        rows = [
            (*row, "" if row.status == "ok" else FALLBACKS.get((row.section, row.directive), "error if a manifest asks for it"))
            for row in supported_directives(target, EMITTED)
        ]
        if fmt == Format.json:
            keys = ("section", "directive", "since", "status", "when_missing")
            doc = {"target": target.describe(), "directives": [dict(zip(keys, r)) for r in rows]}
            typer.echo(json.dumps(doc, indent=2))
            return
        typer.echo(f"# {target.describe()}")
        typer.echo("# section\tdirective\tsince\tstatus\twhen missing")
        for row in rows:
            typer.echo("\t".join(str(x) for x in row).rstrip("\t"))

    return app
