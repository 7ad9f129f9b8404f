"""`jobgen import-crontab`: a manifest from a crontab, each schedule translated faithfully or not at all.

Pure: crontab text in, manifest text and problems out. Reads the three shapes crontab(5)
describes: /etc/crontab and /etc/cron.d files (a user column before the command) and user
crontabs (no user column; the user is given). What each line becomes:

* `m h dom mon dow` or `@nickname`: a calendar schedule via compiler/cron.py, checked here
  against cron's rules over CHECK_DAYS days (tests/test_crontab.py proves each
  over a year against an independent evaluator). Cron's day-of-month OR day-of-week rule takes
  two OnCalendar= expressions: a two-item `schedule:` list, checked as the union of both.
* `@reboot`: `{after_boot: 1min}` (cron.REBOOT_AFTER_BOOT), a run once per boot.
* the command: cron runs every command with `$SHELL -c` (default /bin/sh), so a command with
  shell syntax becomes `[SHELL, -c, "..."]`; a plain one with an absolute program becomes an
  argv list, its words split as the shell splits them (compiler/shellwords.py: the one rule
  a string `command:` follows too). `\\%` is a literal %; an unescaped `%` (the rest of the line is the command's
  standard input in cron) is reported.
* `NAME=value` lines: the environment of the jobs after them; `CRON_TZ` their time zone and
  `RANDOM_DELAY` their randomized delay where the cron that read them acts on those
  (SCHEDULING: cronie does, Debian's cron passes them on as variables); `SHELL` the
  shell; `MAILTO=ADDRESS` the `mail_on_failure:` of the jobs after it (compiler/notify.py),
  `MAILTO=""` none.

Every problem is (line number, message); a line with a problem produces no job.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import PurePath
from typing import Callable
from zoneinfo import ZoneInfo

from jobgen.compiler import cron, limits, notify, shellwords, timespec
from jobgen.compiler.names import ENV_NAME, USER_NAME
from jobgen.contract.oneline import one_line

# The importer compares cron's rules with jobgen's calendar engine (systemd's algorithm, with
# its faults: tests/test_calendar_parity.py) before it writes a schedule; the test suite proves
# each translation again against an evaluator written separately. Where engines go wrong is
# where a value carries over: a month's, February's, a leap year's and a year's end. So the
# check looks at every elapse around each of those (PROBES, up to PROBE_ELAPSES from each) and
# at a long stretch of CHECK_DAYS from CHECK_FROM that holds a February 29th (up to
# CHECK_ELAPSES: a schedule of every minute is proved over the probes, not over 400 days).
CHECK_DAYS = 400
CHECK_FROM = datetime(2027, 12, 1, tzinfo=timezone.utc)
CHECK_ELAPSES = 1500
PROBE_HOURS = 50
PROBE_ELAPSES = 400
PROBES = tuple(
    datetime(*ymd, tzinfo=timezone.utc) - timedelta(hours=PROBE_HOURS // 2)
    for ymd in ((2026, 1, 1), (2026, 2, 1), (2026, 3, 1), (2026, 4, 1), (2026, 7, 1), (2026, 12, 1),
                (2027, 1, 1), (2028, 1, 1), (2028, 2, 29))
)
DEFAULT_SHELL = "/bin/sh"

# Characters that make a command need a shell (anything a POSIX shell treats specially).
_NAME_PART = re.compile(r"[^a-z0-9]+")
_BLANKS = " \t"
_BLANK_RUN = re.compile(r"[ \t]+")
# What a unit file cannot carry (the validator's rule for a command): C0 and C1 controls but
# the tab (the shell's blank), DEL, and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


@dataclass(frozen=True)
class Problem:
    line: int
    message: str
    # cron itself refuses the line (a syntax error to its entry.c, logged as "bad minute",
    # "bad username"...): Debian's cron then ignores the whole file (WHOLE_FILE), cronie the
    # line alone. False where only jobgen declines a line cron runs.
    by_cron: bool = False

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass(frozen=True)
class ImportedJob:
    name: str
    line: int
    source: str  # the crontab line as written
    cron_schedule: str  # the five fields or the @nickname
    # An OnCalendar= expression, a tuple of them (cron's OR rule), or {"after_boot": ...}.
    schedule: str | tuple[str, ...] | dict
    timezone: str | None
    command: tuple[str, ...]
    user: str | None
    environment: tuple[tuple[str, str], ...]
    timer: tuple[tuple[str, str], ...] = ()  # manifest keys from cron's control variables
    mail: str | None = None  # MAILTO: mail_on_failure
    working_directory: str | None = None  # where cron ran it: HOME (Context)


@dataclass
class Imported:
    jobs: list[ImportedJob] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    notes: list[Problem] = field(default_factory=list)


# Variables crontabs set for cron itself (cronie, systemd-cron, anacron), not for the jobs:
# name -> (manifest key, value -> its value or None when unreadable, what it means). They are
# never passed to a job's environment.
_YES = {"true": "true", "yes": "true", "1": "true", "false": "false", "no": "false", "0": "false"}
CONTROL: dict[str, tuple[str, object, str]] = {
    # cronie's crontab(5): "the maximum number of minutes to delay job start"
    "RANDOM_DELAY": ("randomized_delay", lambda v: f"{v}min" if v.isdigit() else None, "a number of minutes"),
    # systemd-cron's crontab(5): catch up on a run missed while the host was off
    "PERSISTENT": ("persistent", lambda v: _YES.get(v.lower()), "yes or no"),
}
# What cron puts in every job's environment unless the crontab sets it (Debian's cron and
# cronie alike: pathnames.h _PATH_DEFPATH). A service gets systemd's own PATH instead
# (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin), where a bare command name can find
# a program cron never ran, or one cron could not find: so it is written into the job.
CRON_DEFAULT_ENV: dict[str, str] = {"PATH": "/usr/bin:/bin"}
# Control variables with no timer meaning: said in a note, not passed on.
CONTROL_NOTED: dict[str, str] = {
    "START_HOURS_RANGE": "anacron's window of hours to start jobs in; a timer has none (use the schedule's hours)",
    "DELAY": "anacron's delay in minutes; use randomized_delay or after_boot",
    "BATCH": "systemd-cron's run-when-idle; jobgen has no equivalent (set nice/CPU weight in the job)",
    "CRON_MAIL_SUCCESS": "systemd-cron's mail on success; jobgen has no mail on success",
    "CRON_MAIL_FORMAT": "systemd-cron's mail format; not used",
}
# Variables some crons act on when they start the jobs after them (cronie), and others pass
# to the jobs as any variable (Debian's cron: host/crontabs.Flavour.acts_on): for such a
# cron, what the import says, the jobs keeping cron's times.
SCHEDULING: dict[str, str] = {
    "CRON_TZ": ("CRON_TZ={value}: Debian's cron runs every job in the host's time zone (cron(8)), so the jobs after "
                "it ran, and run, in that zone, with CRON_TZ in their environment. To run them in {value}, add "
                "`timezone: {value}` (or import with --cron cronie if cronie read this crontab)"),
    "RANDOM_DELAY": ("RANDOM_DELAY={value}: cronie's; Debian's cron does not delay jobs by it, so the jobs after it "
                     "started on time, and do, with RANDOM_DELAY in their environment. To spread their starts, add "
                     "`randomized_delay: {value}min` (or import with --cron cronie if cronie read this crontab)"),
}
ACTS_ON_ALL = frozenset(SCHEDULING)  # cronie's: what a crontab's author expects of these names


# cron reads a command up to '\n' (entry.c get_string): a CR before it stays the command's last
# character, and the shell looked for `backup.sh\r` ("not found"); a variable's value loses it
# (load_env strips trailing white space). The import drops it: what cron ran is said.
_CRLF_NOTE = ("the lines end in CR LF (a file saved on Windows): cron kept the CR as the last character of each "
              "command, so these jobs most likely failed under cron ('...\\r: not found'); imported without it, they "
              "run: check that they should")


def system_format(path: str) -> bool:
    """/etc/crontab and /etc/cron.d/* have the user column; other files are user crontabs."""
    p = PurePath(path)
    return (p.name == "crontab" and p.parent.name == "etc") or p.parent.name == "cron.d"


@dataclass(frozen=True)
class Context:
    """What the host read says about where cron ran a job: `home(user)`, a user's home folder
    (passwd's, None when unknown), and `folder(path)`, whether a folder exists there."""

    home: Callable[[str], str | None]
    folder: Callable[[str], bool]


def read(text: str, stem: str, *, system: bool, user: str | None = None,
         is_user: Callable[[str], bool] | None = None, acts_on: frozenset[str] = ACTS_ON_ALL,
         whole_file: bool = False, users: Callable[[str], bool] | None = None, context: Context | None = None) -> Imported:
    """Every line of a crontab; `user` is the owner of a user crontab (None: unknown).
    `is_user`, given when the format was guessed from the file's name: whether a word names a
    user of the host, so that a copy of a system crontab read as a user crontab is caught.
    `acts_on`: which of SCHEDULING the cron that read it acts on (host/crontabs.Flavour:
    cronie all, Debian's cron none); any other is a variable of the jobs' environment.
    `whole_file`: that cron ignores the whole file when it refuses one line (Debian's cron;
    Flavour.whole_file). `users`: whether a name is a user of the host the crontab is read on,
    when that is known (--host): a system crontab's line for a user that is not one is refused,
    as cron does.
    `context`: where cron ran each job (its working folder); None: not known."""
    out = Imported()
    env: dict[str, str] = {}
    zone: str | None = None
    zone_problem: str | None = None  # the lines after a CRON_TZ jobgen cannot read run at an unknown time
    timer: dict[str, str] = {}
    shell = DEFAULT_SHELL
    mail: str | None = None
    taken: set[str] = set()
    # cron reads lines up to '\n' and fields between blanks (space, tab): not Python's
    # splitlines()/split(), which also break at U+0085, U+2028, form feeds, NBSP... A CRLF file's
    # '\r' is dropped, as before.
    lines = text.split("\n")
    last = len(lines)
    crlf_said = False
    for number, raw in enumerate(lines, start=1):
        crlf = raw.endswith("\r")
        raw = raw.removesuffix("\r")
        line = raw.strip(_BLANKS)
        if not line or line.startswith("#"):
            continue
        if len(raw.encode("utf-8", "surrogatepass")) > limits.COMMAND_BYTES:
            out.problems.append(Problem(number, f"the line is {len(raw.encode('utf-8', 'surrogatepass')):,} bytes long; "
                                        f"a command jobgen runs is at most {limits.COMMAND_BYTES:,} bytes"))
            continue
        if number == last:  # text.split("\n")'s last piece: nothing after it, no line break
            # Debian's cron: "Missing newline before EOF, this crontab file will be ignored" (a
            # job or a variable line); cronie's entry.c: a job line without one is "rude", refused.
            out.problems.append(Problem(number, "the last line has no line break at its end, and cron refuses a line "
                                                "without one", by_cron=True))
            continue
        # cron's load_env(): a line that is not a job (jobs start with a digit, '*' or '@')
        # and reads NAME=VALUE sets the environment of the jobs after it.
        setting = None if line[0] in "@*0123456789" else load_env(line)
        if setting is None and line[0] not in "@*0123456789" and _ASSIGNMENT.match(line):
            # cron reads no variable from it and no job either: nothing it sets may be guessed.
            out.problems.append(Problem(number, f"cron does not read '{line}' as a variable (a quoted value must be "
                                        "closed, and only blanks may follow its closing quote) nor as a job: "
                                        "it sets nothing in cron; rewrite it"))
            continue
        if setting is not None:
            name, value = setting
            if name == "MAILTO" and value:
                mail = None if notify.address_problem(value) else value
                out.notes.append(Problem(number, f"MAILTO={value}: {_MAILTO_NOTE}" if mail else
                                         f"MAILTO={value}: {notify.address_problem(value)}, so the jobs after it mail "
                                         "no one (mail_on_failure takes one address)"))
            elif name == "MAILTO":
                mail = None  # MAILTO="": no mail
            elif name in SCHEDULING and name not in acts_on:
                env[name] = value  # what this cron does with it: one more variable for the jobs
                out.notes.append(Problem(number, SCHEDULING[name].format(value=value)))
            elif name == "CRON_TZ":
                zone_problem = None
                if not timespec.timezone_is_valid(value):
                    out.problems.append(Problem(number, f"CRON_TZ={value} is not a time zone jobgen knows"))
                    zone_problem = (f"it runs in CRON_TZ={value} (line {number}), which is not a time zone jobgen "
                                    "knows: when it runs is unknown")
                    zone = None
                    continue
                if _has_dst(value):
                    out.notes.append(Problem(number, f"CRON_TZ={value} has DST: a job with a fixed minute and hour that "
                                             "falls in the hour the clocks skip runs right after the change in cron, not "
                                             "at all in systemd; in the repeated hour cron runs a job whose minute or hour "
                                             "starts with '*' in both passes, systemd once "
                                             "(`jobgen plan` lists those days)"))
                zone = value
            elif name in CONTROL:
                key, convert, wanted = CONTROL[name]
                converted = convert(value)  # type: ignore[operator]
                if converted is None:
                    out.problems.append(Problem(number, f"{name}={value}: expected {wanted}"))
                else:
                    timer[key] = converted
            elif name in CONTROL_NOTED:
                out.notes.append(Problem(number, f"{name}={value} is {CONTROL_NOTED[name]}; not passed to the jobs"))
            elif name == "SHELL":
                if not value.startswith("/"):
                    out.problems.append(Problem(number, f"SHELL={value} is not an absolute path"))
                shell = value
            else:
                env[name] = value
            continue
        if not system and is_user is not None and (owner := _user_column(raw, is_user)) is not None:
            out.problems.append(Problem(number, f"'{owner}' after the schedule is a user of this host: this looks like a "
                                        "system crontab (a user column before the command, as in /etc/crontab and "
                                        "/etc/cron.d); pass --system to read it so, or --user-crontab if the command "
                                        f"really is '{owner} ...'"))
            continue
        if zone_problem is not None and _split_line(raw, system) is not None:
            out.problems.append(Problem(number, zone_problem))
            continue
        job = _job(number, raw, stem, system=system, user=user, zone=zone, shell=shell, env=env, out=out, users=users,
                   context=context)
        if job is not None and not isinstance(job.schedule, dict):
            job = ImportedJob(**{**job.__dict__, "timer": tuple(sorted(timer.items()))})
        if job is not None:
            job = ImportedJob(**{**job.__dict__, "mail": mail})
        if job is not None:
            name = _unique(job.name, taken)
            taken.add(name)
            out.jobs.append(ImportedJob(**{**job.__dict__, "name": name}))
            if crlf and not crlf_said:  # once a file: every line of it ends so
                crlf_said = True
                out.notes.append(Problem(number, _CRLF_NOTE))
    if whole_file and (refused := next((p for p in out.problems if p.by_cron), None)) is not None:
        out.problems += [Problem(job.line, f"cron runs no line of this file: it refuses line {refused.line} (see there), and "
                                           "Debian's cron then ignores the whole file (\"this crontab file will be ignored\"); "
                                           f"not imported (fix line {refused.line} if these jobs should run)")
                         for job in out.jobs]
        out.jobs = []
    # A message quotes the line: every character shown, none acting on the terminal or the manifest.
    out.problems = [Problem(p.line, _shown(p.message), p.by_cron) for p in out.problems]
    out.notes = [Problem(p.line, _shown(p.message)) for p in out.notes]
    return out


# A message quotes at most this much of a line: one readable line per problem, whatever the input.
MESSAGE_CHARS = 400  # jobgen's own longest note, with a zone's name in it, is some 320


def _shown(message: str) -> str:
    message = one_line(message)
    if len(message) <= MESSAGE_CHARS:
        return message
    return f"{message[:MESSAGE_CHARS]}... ({len(message) - MESSAGE_CHARS:,} more characters)"


# cron mails whatever a job prints; a timer's job prints to the journal, and jobgen mails
# when a run fails (compiler/notify.py).
_MAILTO_NOTE = ("the jobs after it get mail_on_failure: cron mails any output a job prints, jobgen mails when a run "
                "fails (its status and last journal lines, through the host's sendmail); output goes to the journal")


# C's isspace() in the C locale: what cron's env.c skips around a name and a value.
_C_SPACE = " \t\n\v\f\r"
# The start of what can only be meant as a variable setting: a name, maybe quoted, then '='.
_ASSIGNMENT = re.compile(r"""["']?[A-Za-z_][A-Za-z0-9_]*["']?[ \t]*=""")


def load_env(line: str) -> tuple[str, str] | None:
    """(NAME, VALUE) when cron reads the line as a variable setting, else None: a port of
    load_env() (env.c, the same state machine in Vixie cron, Debian's cron and cronie). A name
    or value may be quoted with ' or "; the quotes are dropped and nothing may follow the
    closing one but blanks (`A="x"y` and `A='it's'` set nothing); an unclosed quote sets
    nothing; an unquoted value runs to the end of the line, inner quotes and all, trailing
    blanks trimmed; `A=` sets A to nothing (cronie)."""
    namei, name_, eq1, eq2, valuei, value_, fini, error = range(8)
    state, quote, i = namei, "", 0
    name: list[str] = []
    value: list[str] = []
    buf = name
    while state != error and i < len(line):
        c = line[i]
        if state in (namei, valuei):
            if c in "'\"":
                quote, i = c, i + 1
            state += 1
            if i == len(line):
                break  # a lone opening quote: unclosed
            c = line[i]
        if state in (name_, value_):
            if quote:
                if c == quote:
                    state, i = state + 1, i + 1
                    continue
                if state == name_ and c == "=":
                    state = error
                    continue
            elif state == name_:
                if c in _C_SPACE:
                    state, i = state + 1, i + 1
                    continue
                if c == "=":
                    state += 1
                    continue
            buf.append(c)
            i += 1
        elif state == eq1:
            if c == "=":
                state, buf, quote = state + 1, value, ""
            elif c not in _C_SPACE:
                state = error
            i += 1
        else:  # eq2, fini: blanks are skipped, anything else moves on (from fini: an error)
            if c in _C_SPACE:
                i += 1
            else:
                state += 1
    if state not in (fini, eq2) and not (state == value_ and not quote):
        return None
    text = "".join(value)
    return "".join(name), text.rstrip(_C_SPACE) if state == value_ else text


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name}-{n}", n + 1
    return candidate


def _user_column(raw: str, is_user: Callable[[str], bool]) -> str | None:
    """The word after a user crontab line's schedule when it names a user of the host and a
    command follows it (`*/5 * * * * root /usr/bin/x`), else None."""
    split = _split_line(raw, system=True)
    if split is None:
        return None
    _, owner, command = split
    return owner if owner and is_user(owner) and command.strip() else None


def _fields(raw: str, most: int = 0) -> list[str]:
    """Words between blanks, as cron's entry.c reads them; the last holds the rest (`most` splits)."""
    stripped = raw.strip(_BLANKS)
    return _BLANK_RUN.split(stripped, maxsplit=most) if stripped else []


def _split_line(raw: str, system: bool) -> tuple[str, str | None, str] | None:
    """(schedule, user, command) of a job line, or None when it has too few fields."""
    words = _fields(raw, 1)
    if words[0].startswith("@"):
        nfields = 1
    else:
        nfields = 5
    parts = _fields(raw, nfields + (1 if system else 0))
    if len(parts) < nfields + (2 if system else 1):
        return None
    schedule = " ".join(parts[:nfields])
    if system:
        return schedule, parts[nfields], parts[nfields + 1]
    return schedule, None, parts[nfields]


def _job(number: int, raw: str, stem: str, *, system: bool, user: str | None, zone: str | None, shell: str,
         env: dict[str, str], out: Imported, users: Callable[[str], bool] | None = None,
         context: Context | None = None) -> ImportedJob | None:
    split = _split_line(raw, system)
    if split is None:
        what = "schedule, user and command" if system else "schedule and command"
        out.problems.append(Problem(number, f"expected {what}; got '{raw.strip(_BLANKS)}'", by_cron=True))
        return None
    when, owner, command_text = split
    if not system and command_text.startswith("*"):
        # cron's entry.c, after the fifth field or the @nickname: "check for premature EOL and
        # catch a common typo" (`if (ch == '\n' || ch == '*')`, e_cmd): the line is refused. Read
        # as a command, the shell would expand the '*' and run the first name it finds.
        out.problems.append(Problem(number, f"the command starts with '*': cron refuses the line (a sixth time field? "
                                            f"cron has five); got '{raw.strip(_BLANKS)}'", by_cron=True))
        return None
    owner = owner or user
    if owner is not None and not USER_NAME.fullmatch(owner):
        out.problems.append(Problem(number, f"'{owner}' is not a user name"))  # jobgen's rule (names.USER_NAME), not cron's
        return None
    if system and users is not None and owner != "root" and not users(owner):  # entry.c: getpwnam() fails
        out.problems.append(Problem(number, f"no user '{owner}' on this host: cron refuses the line (bad username)",
                                    by_cron=True))
        return None
    command = _command(number, command_text, shell, out, env)
    schedule = _schedule(number, when, zone, out)
    if command is None or schedule is None:
        return None
    bad_env = [k for k in env if not ENV_NAME.fullmatch(k)]
    if bad_env:
        out.problems.append(Problem(number, f"environment names jobgen cannot pass: {', '.join(bad_env)}"))
        return None
    return ImportedJob(
        name=_name(stem, command, number),
        line=number,
        source=" ".join(_fields(raw)),
        cron_schedule=when,
        schedule=schedule,
        timezone=None if isinstance(schedule, dict) else zone,
        command=command,
        # root too: systemd sets HOME, LOGNAME and USER for a unit with User= only
        # (systemd.exec(5) "Environment Variables in Spawned Processes"), as cron does for all.
        user=owner,
        # cron sets SHELL for the job (/bin/sh unless the crontab sets it); systemd's would be
        # the user's login shell (nologin for many service users).
        environment=tuple(sorted({**CRON_DEFAULT_ENV, "SHELL": shell, **env}.items())),
        working_directory=_working_directory(owner, env, context),
    )


def _working_directory(owner: str | None, env: dict[str, str], context: Context | None) -> str | None:
    """cron runs a job in HOME (do_command.c: `chdir(env_get("HOME", e->envp))`): the
    crontab's HOME, else the user's. Where that folder is missing Vixie and Debian's cron
    ignore the failed chdir and run it in '/', systemd's default too; so only a folder the
    host has is written (a unit whose WorkingDirectory= is missing does not start)."""
    if context is None or owner is None:
        return None
    home = env.get("HOME") or context.home(owner)
    if not home or not home.startswith("/") or ".." in home.split("/") or not context.folder(home):
        return None
    return os.path.normpath(home) if home != "/" else None


def _command(number: int, text: str, shell: str, out: Imported, env: dict[str, str] | None = None) -> tuple[str, ...] | None:
    """cron's command field -> argv: crontab(5) '%' rules, then shell or plain words."""
    if control := _CONTROL.search(text):
        out.problems.append(Problem(number, f"the command contains U+{ord(control[0]):04X} (a control character or "
                                    "line break), which a unit file cannot carry"))
        return None
    text, stdin = percent(text)
    if stdin is not None:
        out.problems.append(Problem(number, "an unescaped '%' ends the command in cron and sends the rest of the "
                                    "line to its standard input; rewrite it (e.g. with a here-document in a script) "
                                    "or escape it as '\\%' if it is meant literally"))
        return None
    # One rule with a string `command:` (compiler/shellwords.py): words the shell would
    # split the same way, with no shell syntax left, need no shell.
    try:
        reading = shellwords.read(text)
    except ValueError:  # an unclosed quote: the shell's problem, as it was cron's
        reading = None
    if (reading is not None and not reading.syntax and reading.words and reading.words[0].startswith("/")
            and _runs_words_as_they_are(shell, env or {})):
        return reading.words
    # cron runs the command as `$SHELL -c command`: that is exactly what the job runs.
    return (shell, "-c", text)


# Shells whose `-c` runs a line of plain words as exactly that argv and reads nothing first.
# Any other SHELL= (fish, csh, a script) has its own quoting; bash reads $BASH_ENV before a
# `-c` line (bash(1), INVOCATION), which the argv would skip.
_PLAIN_SHELLS = frozenset({"/bin/sh", "/usr/bin/sh", "/bin/dash", "/usr/bin/dash", "/bin/bash", "/usr/bin/bash"})


def _runs_words_as_they_are(shell: str, env: dict[str, str]) -> bool:
    return shell in _PLAIN_SHELLS and not (shell.endswith("/bash") and env.get("BASH_ENV"))


def percent(text: str) -> tuple[str, str | None]:
    """(command, standard input or None): cron's reading of '%' in the command field
    (do_command.c, Vixie cron and cronie alike). A backslash escapes the one character after
    it and only `\\%` loses its backslash; so `\\\\%` is an escaped backslash and then a '%'
    that ends the command, not a literal '%'."""
    out: list[str] = []
    escaped = False
    for i, c in enumerate(text):
        if escaped:
            if c == "%":
                out[-1] = c  # the backslash gives way to the '%'
            else:
                out.append(c)
            escaped = False
        elif c == "\\":
            out.append(c)
            escaped = True
        elif c == "%":
            return "".join(out), text[i + 1:]
        else:
            out.append(c)
    return "".join(out), None


def _schedule(number: int, when: str, zone: str | None, out: Imported) -> str | tuple[str, ...] | dict | None:
    if when.startswith("@") and when != when.lower() and when.lower() in (*cron.NICKNAMES, cron.REBOOT):
        # cron compares a nickname with strcmp() (entry.c): '@Daily' is a syntax error there,
        # a line that never runs, not a daily job.
        out.problems.append(Problem(number, f"'{when}': cron's nicknames are lower case; cron refuses '{when}' and "
                                    f"never runs the line (write '{when.lower()}' to run it)", by_cron=True))
        return None
    if when.lower() == cron.REBOOT:
        return {"after_boot": cron.REBOOT_AFTER_BOOT}
    if when.lower() in cron.FOREIGN_NICKNAMES:
        out.problems.append(Problem(number, cron.FOREIGN_NICKNAMES[when.lower()], by_cron=True))
        return None
    known = [n for n in cron.NICKNAMES if n not in cron.SYSTEMD_CRON_NICKNAMES]
    if when.startswith("@") and when.lower() not in cron.NICKNAMES:
        out.problems.append(Problem(number, f"unknown nickname '{when}' (cron knows {', '.join([*known, cron.REBOOT])})",
                                    by_cron=True))
        return None
    if when.lower() in cron.SYSTEMD_CRON_NICKNAMES:
        same = cron.to_calendar(cron.parse(cron.NICKNAMES[when.lower()]))[0]
        out.problems.append(Problem(number, f"'{when}' is systemd-cron's, not cron's: Debian's cron and cronie refuse the "
                                            f"line (bad time specifier), so it never ran here; not imported (for those "
                                            f"runs write schedule: '{same}')", by_cron=True))
        return None
    try:
        parsed = cron.parse(when)
    except cron.CronError as exc:
        out.problems.append(Problem(number, f"'{when}': {exc}", by_cron=exc.refused))
        return None
    if cron.never_runs(parsed):
        out.problems.append(Problem(number, f"'{when}': cron never runs this line: no month it names has that day "
                                    "(a way to switch a line off); there is nothing to import"))
        return None
    # Both day fields restricted: cron runs when either matches (crontab(5)), which is two
    # OnCalendar= lines on one timer, a two-item list; checked as their union.
    calendars = cron.to_calendar(parsed)
    if (problem := check(parsed, calendars, zone)) is not None:
        out.problems.append(Problem(number, f"'{when}': no faithful translation: {problem}"))
        return None
    return calendars[0] if len(calendars) == 1 else calendars


def _has_dst(zone: str) -> bool:
    if zone == "UTC":
        return False
    z = ZoneInfo(zone)
    return any(datetime(2026, m, 1, tzinfo=z).dst() for m in range(1, 13))


def cron_times(s: cron.CronSchedule, start: datetime, end: datetime, most: int | None = None) -> list[datetime]:
    """crontab(5): the wall-clock minutes in (start, end] at which the schedule fires (the
    first `most` of them)."""
    out = []
    day = start.replace(hour=0, minute=0, second=0, microsecond=0)
    while day <= end:
        weekday = (day.weekday() + 1) % 7  # cron: 0 = Sunday
        day_ok, dow_ok = day.day in s.days, weekday in s.weekdays
        if day.month in s.months and ((day_ok or dow_ok) if s.either_day else (day_ok and dow_ok)):
            for hour in sorted(s.hours):
                for minute in sorted(s.minutes):
                    t = day.replace(hour=hour, minute=minute)
                    if start < t <= end:
                        out.append(t)
                        if len(out) == most:
                            return out
        day += timedelta(days=1)
    return out


class _Union:
    """A timer's OnCalendar= lines: it elapses at each one's elapses (systemd.timer(5))."""

    def __init__(self, calendars: tuple[str, ...]):
        self.parts = [timespec.parse_calendar(c + " UTC") for c in calendars]

    def next_elapses(self, start: datetime, n: int) -> list[datetime]:
        return sorted({t for part in self.parts for t in part.next_elapses(start, n)})[:n]


def check(s: cron.CronSchedule, calendars: str | tuple[str, ...], zone: str | None = None) -> str | None:
    """Compare the elapses of the calendar (or the union of the calendars) with cron's around
    every PROBE and over CHECK_DAYS, in wall-clock time (UTC: cron and systemd read the same
    local time; their DST rules differ, README: import-crontab); None when they are the same.
    Each expression must also be computable in the zone the job runs in (systemd 252 loops
    forever on some, in some zones)."""
    calendars = (calendars,) if isinstance(calendars, str) else calendars
    calendar = "' + '".join(calendars)  # how a message names them
    engine = _Union(calendars)
    windows = [(base, base + timedelta(hours=PROBE_HOURS), PROBE_ELAPSES) for base in PROBES]
    windows.append((CHECK_FROM, CHECK_FROM + timedelta(days=CHECK_DAYS), CHECK_ELAPSES))
    for start, end, most in windows:
        if (problem := _differs(s, calendar, engine, start, end, most)) is not None:
            return problem
    for one in calendars if zone is not None else ():
        try:
            zoned = timespec.parse_calendar(f"{one} {zone}")
            zoned.next_elapses(CHECK_FROM, 2)
        except ValueError as exc:
            return f"systemd cannot compute '{one}' in {zone}: {exc}"
        # The starts `check` probes (the month starts and DST changes of a year), as check warns.
        found = timespec.search(zoned, timespec.Steps(timespec.EXPRESSION_STEPS))
        if found.loop is not None:
            return f"systemd cannot compute '{one}' in {zone}: {found.loop}"
    return None


def _differs(s: cron.CronSchedule, calendar: str, engine, start: datetime, end: datetime, most: int) -> str | None:
    expected = cron_times(s, start, end, most)
    if len(expected) == most:
        end = expected[-1]  # the window is cut at the last elapse compared
    got = [t for t in engine.next_elapses(start, len(expected) + 1) if t <= end]
    for want, have in zip(expected + [None], got + [None]):
        if want != have:
            if have is None or (want is not None and want < have):
                return f"cron runs at {want:%Y-%m-%d %H:%M} but '{calendar}' does not"
            return f"'{calendar}' elapses at {have:%Y-%m-%d %H:%M} but cron does not run then"
    return None


# The name of a job says what it runs. In a shell command that is the first simple command
# that is not a guard: `test -e /run/systemd/system || /sbin/e2scrub_all` runs e2scrub_all, not
# "system"; `cd / && run-parts /etc/cron.daily` runs the folder's scripts: "cron-daily".
_SEPARATORS = re.compile(r"&&|\|\||[;|&(){}\n]")
_KEYWORDS = frozenset("if then else elif fi do done while until ! time".split())  # sh(1) reserved words
_GUARDS = frozenset({"test", "[", "[[", "cd", ":", "true", "false", "exit", "echo", "sleep", "sh", "bash"})
_WRAPPERS = frozenset("exec nice ionice env nohup timeout chronic".split())  # options, then the program
_SKIPPED_WORD = re.compile(r"-.*|[0-9.]+[smhd]?|[A-Za-z_][A-Za-z0-9_]*=.*")  # an option, a number, NAME=value
STEM_MAX = 60  # a name stays far below limits.NAME whatever the file's name
BASE_MAX = 40


def program(command: tuple[str, ...]) -> str:
    """What a job runs, for its name: the program, or the script or folder a shell runs."""
    if not (len(command) == 3 and command[1] == "-c"):
        return command[0]
    for part in _SEPARATORS.split(command[2]):
        words = [w.strip("'\"") for w in part.split()]
        while words and (words[0] in _KEYWORDS or _SKIPPED_WORD.fullmatch(words[0])):
            words = words[1:]
        while words and words[0].rsplit("/", 1)[-1] in _WRAPPERS:
            words = words[1:]
            while words and _SKIPPED_WORD.fullmatch(words[0]):
                words = words[1:]
        if not words or words[0].rsplit("/", 1)[-1] in _GUARDS or words[0].startswith(("<", ">")):
            continue
        if words[0].rsplit("/", 1)[-1] == "run-parts":
            folders = [w for w in words[1:] if not w.startswith("-")]
            return folders[-1] if folders else words[0]
        return words[0]
    return ""  # nothing but guards and assignments: the name says "job"


def name_part(text: str, limit: int, default: str) -> str:
    """Text as a part of a job name: lower case letters, digits and '-' (a valid unit name
    whatever the text: systemd.unit(5)), at most `limit` characters."""
    return _NAME_PART.sub("-", text.lower())[:limit].strip("-") or default


def _name(stem: str, command: tuple[str, ...], number: int) -> str:
    """A readable unit name: the source's stem, what the line runs and the line number."""
    base = name_part(program(command).rstrip("/").rsplit("/", 1)[-1], BASE_MAX, "job")
    return f"{name_part(stem, STEM_MAX, 'cron')}-{base}-l{number}"


def unique_name(name: str, taken: set[str]) -> str:
    """`name`, or `name-2`, `name-3`, ...: the first one not taken."""
    return _unique(name, taken)


# --------------------------------------------------------------------------- the manifest


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is valid YAML). JSON leaves DEL, the
    C1 controls and format characters raw, which YAML does not allow: escaped as \\uXXXX."""
    quoted = json.dumps(text, ensure_ascii=False)
    return quoted if quoted.isprintable() else "".join(c if c.isprintable() else _json_escape(c) for c in quoted)


def _json_escape(c: str) -> str:
    n = ord(c)
    return f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"  # YAML's 8-digit escape: JSON has none


def manifest(imported: Imported, source: str) -> str:
    """The jobs as a jobgen manifest (YAML), each with its crontab line beside it."""
    return _manifest(imported, source)[0]


def _manifest(imported: Imported, source: str) -> tuple[str, dict[str, tuple[int, int]]]:
    """The manifest text and, per job, the first and last line of its entry (settle() maps the
    validator's positions back to crontab lines with them)."""
    lines = [
        f"# Imported by `jobgen import-crontab` from {one_line(source)}.",
        "# Each schedule was compared with cron's rules; cron's DST handling differs (README: import-crontab).",
        "# cron starts a run even while the previous one is still going; these jobs skip instead",
        "# (overlap: skip, jobgen's default): set overlap: allow to keep cron's behaviour.",
        "# cron runs a job without a sandbox; so do these (hardening: none): raise it job by job",
        "# once the job is known to work under it (README: Hardening).",
    ]
    lines += [f"# line {p.line} not imported: {p.message}" for p in sorted(imported.problems, key=lambda p: p.line)]
    lines += ["jobgen: 1", "jobs:" if imported.jobs else "jobs: {}"]
    spans: dict[str, tuple[int, int]] = {}
    for job in imported.jobs:
        first = len(lines) + 1
        lines.append(f"  # line {job.line}: {one_line(job.source)}")
        lines.append(f"  {job.name}:")
        lines.append(f"    description: {_q(f'cron: {job.source}')}")
        lines.append("    command: [" + ", ".join(_q(w) for w in job.command) + "]")
        if isinstance(job.schedule, dict):
            lines.append(f"    schedule: {{after_boot: {job.schedule['after_boot']}}}")
        elif isinstance(job.schedule, tuple):
            lines.append("    schedule: [" + ", ".join(_q(c) for c in job.schedule) + "]")
        else:
            lines.append(f"    schedule: {_q(job.schedule)}")
        if job.timezone:
            lines.append(f"    timezone: {job.timezone}")
        if job.user:
            lines.append(f"    user: {job.user}")
        if job.working_directory:
            lines.append(f"    working_directory: {_q(job.working_directory)}")
        if job.mail:
            lines.append(f"    mail_on_failure: {_q(job.mail)}")
        lines.append("    hardening: none")
        lines += [f"    {key}: {value}" for key, value in job.timer]
        if job.environment:
            lines.append("    environment:")
            lines += [f"      {k}: {_q(v)}" for k, v in job.environment]
        spans[job.name] = (first, len(lines))
    return "\n".join(lines) + "\n", spans


def settle(imported: Imported, source: str, where: str) -> str:
    """The manifest, once every job jobgen's own validator refuses is taken out and its crontab
    line reported with the validator's reason: cron accepts lines systemd cannot run (such as
    '0 0 31 2 *', which never elapses: a common way to switch a line off). A problem that
    belongs to no job is jobgen's own bug: ManifestError is raised."""
    from jobgen.compiler import load, validate
    from jobgen.compiler.diagnostics import ERROR, ManifestError

    while True:
        text, spans = _manifest(imported, source)
        if not imported.jobs:
            return text  # nothing to validate: a record of what was refused, and why
        if len(text.encode()) > limits.MANIFEST_BYTES:  # the last jobs go, each reported, until it fits
            last = imported.jobs.pop()
            imported.problems.append(Problem(last.line, f"the manifest would be larger than {limits.MANIFEST_BYTES // 2**20} "
                                             "MiB, jobgen's limit for one manifest: import the crontab in parts"))
            continue
        try:
            validate.validate(load.load_text(text, where), where)
            return text
        except ManifestError as exc:
            refused: dict[str, str] = {}
            for d in (d for d in exc.diagnostics if d.severity == ERROR):
                name = next((n for n, (a, b) in spans.items() if a <= d.pos.line <= b), None)
                if name is None:
                    raise
                refused.setdefault(name, d.message)
            for job in imported.jobs:
                if job.name in refused:
                    imported.problems.append(Problem(job.line, one_line(f"jobgen refuses the translation: {refused[job.name]}")))
            imported.jobs = [j for j in imported.jobs if j.name not in refused]
