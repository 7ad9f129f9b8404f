#!/usr/bin/env python3
"""The manual pages jobgen(1), jobgen-generator(8) and jobgen.yaml(5), generated, never edited.

Not a second copy that can drift: jobgen(1) is read from the typer app's commands (each
command's help, arguments and options, as `jobgen COMMAND --help` shows them) and the exit
code tables (cli/exits.py EXIT_CODES, contract.locks.EXIT); jobgen.yaml(5) from the key
tables validation uses (validate.JOB_KEYS, WORKER_KEYS, _LOCK_KEYS, _QUEUE_KEYS,
_SCHEDULE_FORMS, TOP_LEVEL_KEYS) with each key's value described by tools/schema.py's
converters and the directive it writes (Key.writes); jobgen-generator(8) from
cli/generator.py and host/generator.py's constants.

    python tools/gen_manpages.py docs/man     # rewrite the committed pages (from the repository root)

tests/integrations/test_manpages.py checks that the committed pages equal the generated
ones and that `man --warnings -l` renders each without a warning. No date in .TH: same
code, same bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from jobgen import __version__

SOURCE = f"jobgen {__version__}"


def esc(text: str) -> str:
    r"""Plain text for roff: backslashes escaped, a leading control character neutralised."""
    text = text.replace("\\", "\\e")
    lines = [("\\&" + line if line.startswith((".", "'")) else line) for line in text.split("\n")]
    return "\n".join(lines)


def opt(text: str) -> str:
    r"""An option or command as written: hyphens as \- so it can be copied and searched."""
    return esc(text).replace("-", "\\-")


def _head(name: str, section: int, title: str, what: str) -> list[str]:
    return [f'.TH {name.upper()} {section} "" "{SOURCE}" "{title}"', ".nh", ".SH NAME", f"{opt(name)} \\- {esc(what)}"]


def _tp(term: str, body: str) -> list[str]:
    return [".TP", term, esc(body)]


# ----------------------------------------------------------------------------- jobgen(1)


def jobgen_1() -> str:
    # `jobgen run --holder` defaults to the jobgen that runs: shown as the packaged one.
    from jobgen.cli.app import app

    argv0, sys.argv[0] = sys.argv[0], "/usr/bin/jobgen"
    app.cache_clear()  # the options' defaults are taken when the app is built
    try:
        return _jobgen_1()
    finally:
        sys.argv[0] = argv0
        app.cache_clear()


def _jobgen_1() -> str:
    import typer.main

    from jobgen.cli.app import app
    from jobgen.cli.exits import EXIT_CODES
    from jobgen.contract.locks import EXIT as LOCK_EXIT

    group = typer.main.get_command(app())
    context = type(group.make_context("jobgen", [], resilient_parsing=True))  # click's, or typer's copy of it
    ctx = context(group, info_name="jobgen")
    out = _head("jobgen", 1, "User Commands", "compile a YAML job manifest into systemd units")
    out += [".SH SYNOPSIS", ".B jobgen", ".I COMMAND", "[\\fIOPTIONS\\fR] [\\fIARGUMENTS\\fR]", ".br",
            ".B jobgen \\-\\-version", ".br", ".B jobgen", "[\\fICOMMAND\\fR] \\fB\\-\\-help\\fR"]  # fmt: skip
    out += [".SH DESCRIPTION", esc(group.help or ""), ".PP",
            esc("Each scheduled job becomes a Type=oneshot service and a timer whose ExecStart= is guarded by a lock "
                "every runner of the job sees; each long-running worker becomes a service that stops gracefully and "
                "restarts with backoff. The manifest format is described in jobgen.yaml(5)."),
            ".SH COMMANDS"]  # fmt: skip
    for name, command in group.commands.items():
        if command.hidden:
            continue
        sub = context(command, info_name=name, parent=ctx)
        arguments = [p for p in command.params if getattr(p, "param_type_name", "") == "argument"]
        usage = " ".join(_argument_usage(p) for p in arguments)
        out += [f'.SS "jobgen {opt(name)}{(" " + esc(usage)) if usage else ""}"', esc(command.help or "")]
        for param in command.params:
            record = param.get_help_record(sub)
            if param in arguments:
                term, body = _argument_usage(param), getattr(param, "help", None) or (record[1] if record else "")
                if body:
                    out += _tp(f"\\fI{esc(term)}\\fR", body)
                continue
            if record:
                out += _tp(f"\\fB{opt(record[0])}\\fR", record[1])
    out += [".SH EXIT STATUS", esc("jobgen's own exit codes; a job's, and the lock holder's when the command ran, pass through.")]
    for code, meaning in EXIT_CODES:
        out += _tp(f"\\fB{code}\\fR", meaning)
    out += [".PP", esc("jobgen lock, by outcome:")]
    for outcome, (code, meaning) in LOCK_EXIT.items():
        out += _tp(f"\\fB{code}\\fR ({esc(outcome)})", meaning)
    out += [".SH ENVIRONMENT", ".TP", "\\fBJOBGEN_DEBUG\\fR", esc("1: an internal error shows where it happened (a traceback).")]
    out += [".SH SEE ALSO", "jobgen.yaml(5), jobgen\\-generator(8), systemd.service(5), systemd.timer(5), systemd.time(7), flock(1)"]
    return "\n".join(out) + "\n"


def _argument_usage(param) -> str:
    metavar = param.metavar or param.name.upper()
    return metavar + ("..." if param.nargs == -1 and not metavar.endswith("...") else "")


# ------------------------------------------------------------------- jobgen-generator(8)


def jobgen_generator_8() -> str:
    from jobgen.cli.generator import EXIT_CANNOT_WRITE, IDENT
    from jobgen.host.generator import MANIFEST_DIRS, MANIFEST_DIRS_ENV

    etc, usr = MANIFEST_DIRS
    out = _head(IDENT, 8, "System Administration", "turn jobgen manifests into systemd units at boot and daemon-reload")
    from jobgen.host import genpersist

    out += [".SH SYNOPSIS", f".B {opt(IDENT)}", ".I NORMAL_DIR", "[\\fIEARLY_DIR LATE_DIR\\fR]", ".br",
            f".B {opt(IDENT)} {opt(genpersist.OPTION)}", "[\\fIINTO FROM\\fR...]"]
    out += [".SH DESCRIPTION",
            esc(f"{IDENT} is a systemd generator (systemd.generator(7)): systemd runs it at boot and at every "
                f"systemctl daemon-reload, before any unit is loaded. Every *.yaml manifest in {', '.join(MANIFEST_DIRS)} "
                f"is compiled as jobgen render would, and its units are written into NORMAL_DIR."), ".PP",
            esc(f"A file in {etc} replaces the same-named file in {usr}; an empty file or a link to /dev/null there "
                f"masks it. {MANIFEST_DIRS_ENV}, a colon-separated list, replaces the folders (for tests)."), ".PP",
            esc("A manifest with problems is reported (file:line:col: error: message) and skipped; the other manifests' "
                "units are still generated. The problems go to the kernel log, which journald reads "
                f"(SYSLOG_IDENTIFIER={IDENT}), or journald's socket where there is no /dev/kmsg."),
            ".SH EXIT STATUS"]  # fmt: skip
    out += _tp("\\fB0\\fR", "units generated, or manifests with problems reported and skipped")
    out += _tp(f"\\fB{EXIT_CANNOT_WRITE}\\fR", "the output folder cannot be written: nothing could be generated")
    out += [".SH FILES"]
    out += _tp(f"\\fI{esc(etc)}/*.yaml\\fR", "the administrator's manifests")
    out += _tp(f"\\fI{esc(usr)}/*.yaml\\fR", "manifests installed by packages")
    from jobgen.host import gencache
    from jobgen.host.gencache import FOLDER, FOLDER_ENV, RUN_FOLDER

    out += _tp(f"\\fI{esc(FOLDER)}\\fR, \\fI{esc(RUN_FOLDER)}\\fR",
               esc("the compiled cache, looked in in this order: a run with the inputs of an earlier complete run "
                   "writes what that run wrote without compiling. The first survives reboots; the second is written "
                   f"where the first cannot be (systemd 257 runs generators with all but /run read-only). {FOLDER_ENV} "
                   "names other folders (colon-separated); empty turns the cache off. Deleting them is always safe."))
    out += _tp(f"\\fI{esc(genpersist.PATH_UNIT)}\\fR, \\fI{esc(genpersist.SERVICE_UNIT)}\\fR",
               esc(f"written beside the manifests' units whenever the cache has both folders: when a run could store its "
                   f"entry only in {RUN_FOLDER} it leaves {gencache.PENDING} there, and the path unit starts the service, "
                   f"which runs {IDENT} {genpersist.OPTION} after local-fs.target: every entry of {RUN_FOLDER} the "
                   f"generator itself would use is moved into {FOLDER} (INTO and FROM name other folders), so the next "
                   "boot is a hit. It logs one line and always exits 0; an entry it cannot keep stays where it was."))
    out += [".SH SEE ALSO", "jobgen(1), jobgen.yaml(5), systemd.generator(7), systemctl(1)"]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------ jobgen.yaml(5)


def _value(spec: dict) -> str:
    if "enum" in spec:
        return "one of: " + ", ".join(str(v) for v in spec["enum"])
    text = spec.get("description", "")
    for alternatives in ("anyOf", "oneOf"):
        if not text and alternatives in spec:
            text = " or ".join(dict.fromkeys(s.get("description", "") for s in spec[alternatives] if s.get("description")))
    return text


def _keys(table, what: str, required: dict[str, str]) -> list[str]:
    from jobgen.tools.schema import _convert

    out: list[str] = []
    for key, spec in table.items():
        parts = [_value(_convert(spec.convert, f"{what}.{key}"))]
        if key in required:
            parts.insert(0, f"Required: {required[key]}")
        if spec.writes:
            parts.append(f"Writes {spec.writes.directive}= in [{spec.writes.section}]")
        out += _tp(f"\\fB{esc(key)}\\fR", ". ".join(p.rstrip(".") for p in parts if p) + ".")
    return out


def jobgen_yaml_5() -> str:
    from jobgen.compiler import validate
    from jobgen.tools.schema import _convert

    out = _head("jobgen.yaml", 5, "File Formats", "the jobgen job manifest")
    out += [".SH SYNOPSIS", ".I manifest.yaml", ".SH DESCRIPTION",
            esc("A jobgen manifest is a YAML mapping. jobgen reads every scalar as the text written (no YAML 1.1 "
                "coercions: yes stays yes) and refuses duplicate keys. Every problem is reported at once, as "
                "file:line:col: error: message, and an invalid manifest writes nothing."),
            ".SH TOP-LEVEL KEYS"]  # fmt: skip
    top = {"jobgen": "the manifest format version (1); required",
           "target": "the systemd the units are for: systemd: a version (252), a range (>=252,<258) or a preset (debian-12)",
           "defaults": "keys every job and worker gets unless it sets them itself",
           "jobs": "scheduled jobs: NAME: {keys below}", "workers": "long-running workers: NAME: {keys below}"}  # fmt: skip
    for key in validate.TOP_LEVEL_KEYS:
        out += _tp(f"\\fB{esc(key)}\\fR", top[key])
    job_only = {k: v for k, v in validate.JOB_KEYS.items() if k not in validate.COMMON_KEYS}
    worker_only = {k: v for k, v in validate.WORKER_KEYS.items() if k not in validate.COMMON_KEYS}
    out += [".SH KEYS OF JOBS AND WORKERS"] + _keys(validate.COMMON_KEYS, "job", {"command": "the program and its arguments"})
    out += [".SH JOB KEYS"] + _keys(job_only, "job", {k: v for k, v in validate.REQUIRED_JOB_KEYS.items() if k in job_only})
    out += [".SH WORKER KEYS"] + _keys(worker_only, "worker", {k: v for k, v in validate.REQUIRED_WORKER_KEYS.items() if k in worker_only})
    out += [".SH SCHEDULE", esc("schedule: is an OnCalendar= expression (systemd.time(7)), or a mapping with one of:")]
    for form, conv in validate._SCHEDULE_FORMS.items():
        out += _tp(f"\\fB{esc(form)}\\fR", "an OnCalendar= expression" if conv is validate.calendar else "a time span (systemd.time(7))")
    out += [".SH LOCK", esc("lock: is a scope, or a mapping of:")]
    for key, conv in validate._LOCK_KEYS.items():
        out += _tp(f"\\fB{esc(key)}\\fR", _value(_convert(conv, f"lock.{key}")))
    out += [".SH QUEUE", esc("With overlap: queue, queue: is a mapping of:")]
    for key, conv in validate._QUEUE_KEYS.items():
        out += _tp(f"\\fB{esc(key)}\\fR", _value(_convert(conv, f"queue.{key}")))
    out += [".SH EXAMPLE", ".nf", ".RS 4", *[esc(line) for line in EXAMPLE.splitlines()], ".RE", ".fi"]
    out += [".SH SEE ALSO", "jobgen(1), jobgen\\-generator(8), systemd.service(5), systemd.timer(5), systemd.time(7)"]
    return "\n".join(out) + "\n"


EXAMPLE = """\
jobgen: 1
target:
  systemd: ">=252"
jobs:
  catalog-refresh:
    command: [/usr/bin/php, /srv/shop/artisan, "catalog:refresh"]
    schedule: "*:0/5"
    overlap: skip
    timeout: 4min
workers:
  mailer:
    command: [/usr/bin/php, /srv/shop/artisan, "queue:work"]
    instances: 3
    stop_timeout: 30s"""

# file name -> generator
PAGES = {"jobgen.1": jobgen_1, "jobgen-generator.8": jobgen_generator_8, "jobgen.yaml.5": jobgen_yaml_5}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: tools/gen_manpages.py DIR", file=sys.stderr)
        return 2
    folder = Path(argv[0])
    folder.mkdir(parents=True, exist_ok=True)
    for name, make in PAGES.items():
        (folder / name).write_text(make(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
