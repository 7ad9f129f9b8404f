"""`jobgen import-crontab --host`: every crontab of a host as manifests, one per source, and
one report of what became of each line.

Pure: what host/crontabs.py read in, manifests and report lines out. Each source is read
as tools/crontab.py reads a single file; what a host adds:

* run-parts folders are mapped once. Debian's /etc/crontab runs /etc/cron.hourly itself and
  the daily, weekly and monthly folders with `test -x /usr/sbin/anacron || run-parts ...`
  (when anacron is installed, /etc/anacrontab runs them instead). Translating those lines as
  they are would run each folder twice (a timer for the line, and anacron's), and one unit
  for a whole folder hides which script failed. So each line that runs a folder is reported
  as mapped, and the folder becomes its own manifest: one job per script run-parts would
  run, on the schedule of the /etc/crontab line that runs the folder, with `persistent: true`
  where anacron was to run it (a run missed while the host was off is made up, anacron's
  purpose). The scripts start at the same time, where run-parts ran them one after another.
* job names are unique across the host (unit names share one namespace).
* per line, what differs at the DST changes of the job's zone (tools/crontab_dst.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from jobgen.compiler.diagnostics import ManifestError
from jobgen.tools import crontab as tool
from jobgen.tools import crontab_dst

# The report's words; IGNORED: a file cron itself would not read.
TRANSLATED, REFUSED, REVIEW, MAPPED, IGNORED = "translated", "refused", "needs review", "mapped", "ignored"
MANIFEST_SUFFIX = ".yaml"
# `run-parts [options] /etc/cron.PERIOD` anywhere in a command.
_RUN_PARTS = re.compile(r"(?:^|[\s;&|{(])(?:/bin/|/usr/bin/)?run-parts(?:\s+-\S+)*\s+/etc/cron\.(hourly|daily|weekly|monthly)/?(?=$|[\s;&|})])")
_ANACRON_GUARD = re.compile(r"test\s+-x\s+/usr/sbin/anacron\s*\|\|")
_REVIEW_ALWAYS = ("hardening: none and overlap: skip: cron ran these jobs without a sandbox and started a run "
                  "while the last one was still going (README: import-crontab)")


@dataclass
class Source:
    """One file (or run-parts folder) and what became of it."""

    path: str
    manifest: str | None  # the manifest's file name, None when nothing is written for it
    imported: tool.Imported
    text: str | None = None  # the manifest
    mapped: list[tuple[int, str]] = field(default_factory=list)  # (line, what)
    dst: dict[int, list[str]] = field(default_factory=dict)  # line -> differences


@dataclass
class HostImport:
    sources: list[Source] = field(default_factory=list)
    report: list[str] = field(default_factory=list)
    refused: int = 0
    jobs: int = 0

    @property
    def files(self) -> dict[str, str]:
        return {s.manifest: s.text for s in self.sources if s.manifest and s.text is not None}


def run_parts_folder(command: tuple[str, ...]) -> str | None:
    """The period of the /etc/cron.PERIOD folder a command runs with run-parts, or None."""
    text = command[2] if len(command) == 3 and command[1] == "-c" else " ".join(command)
    m = _RUN_PARTS.search(text)
    return m.group(1) if m else None


def import_host(cron, zone: str | None) -> HostImport:
    """`cron`: a host/crontabs.HostCron; `zone`: the zone jobs without CRON_TZ run in (--zone,
    else the host's), for the DST report."""
    out = HostImport()
    taken: set[str] = set()
    by_period: dict[str, tuple[tool.ImportedJob, str]] = {}  # period -> (the line's job, its source)

    if cron.crontab is not None:
        src = Source(cron.crontab.path, "crontab" + MANIFEST_SUFFIX, tool.read(cron.crontab.text, "crontab", system=True))
        for job in list(src.imported.jobs):
            period = run_parts_folder(job.command)
            if period is None:
                continue
            src.imported.jobs.remove(job)
            guarded = bool(_ANACRON_GUARD.search(job.command[-1]))
            if guarded and cron.anacron:
                why = (f"runs /etc/cron.{period} with run-parts when anacron is not installed; anacron is, and "
                       f"runs it: the folder's scripts are imported once, from the folder, at this line's time with "
                       "persistent: true")
            else:
                why = (f"runs /etc/cron.{period} with run-parts: the folder's scripts are imported once, from the "
                       "folder, at this line's time")
            src.mapped.append((job.line, why))
            by_period[period] = (job, "true" if guarded and cron.anacron else "")
        out.sources.append(src)
    for crontab in cron.cron_d:
        name = crontab.rel.rsplit("/", 1)[-1]
        # cron.d names are run-parts names (host/crontabs.py), user names are user names: safe file names
        out.sources.append(Source(crontab.path, f"cron.d-{name}{MANIFEST_SUFFIX}", tool.read(crontab.text, name, system=True)))
    for folder in cron.folders:
        out.sources.append(_folder(folder, by_period.get(folder.period)))
    if cron.anacrontab is not None:
        out.sources.append(_anacrontab(cron.anacrontab.path, cron.anacrontab.text))
    for crontab in cron.spool:
        users = cron.users
        imported = tool.read(crontab.text, crontab.user, system=False, user=crontab.user, is_user=lambda w: w in users)
        out.sources.append(Source(crontab.path, f"user-{crontab.user}{MANIFEST_SUFFIX}", imported))

    for src in out.sources:
        _settle(src, taken)
        for job in src.imported.jobs:
            job_zone = job.timezone or zone
            if job_zone and not isinstance(job.schedule, dict) and crontab_dst.has_dst(job_zone):
                if diffs := crontab_dst.differences(job.cron_schedule, job.schedule, job_zone):
                    src.dst[job.line] = diffs
    out.report = _report(out, cron)
    return out


def _folder(folder, runner: tuple[tool.ImportedJob, str] | None) -> Source:
    src = Source(folder.path, f"cron.{folder.period}{MANIFEST_SUFFIX}", tool.Imported())
    if runner is None:
        if folder.scripts:
            src.imported.problems.append(tool.Problem(0, "no line of /etc/crontab runs this folder, so cron never "
                                                      "runs its scripts: nothing imported"))
        return src
    job, persistent = runner
    timer = dict(job.timer)
    if persistent:
        timer["persistent"] = persistent
    names: set[str] = set()
    for script in folder.scripts:
        name = tool.unique_name(f"cron-{folder.period}-{tool.name_part(script, tool.BASE_MAX, 'job')}", names)
        names.add(name)
        src.imported.jobs.append(tool.ImportedJob(
            name=name, line=job.line, source=f"/etc/cron.{folder.period}/{script}, run by run-parts from /etc/crontab line {job.line}",
            cron_schedule=job.cron_schedule, schedule=job.schedule, timezone=job.timezone,
            command=(f"/etc/cron.{folder.period}/{script}",), user=None, environment=job.environment,
            timer=tuple(sorted(timer.items())), mail=job.mail))
    return src


def _anacrontab(path: str, text: str) -> Source:
    """anacrontab(5): `period delay identifier command`. Its run-parts lines are the folders'
    (mapped above); any other job runs every N days counted from its last run, which no
    calendar expression is: reported for translation by hand."""
    src = Source(path, None, tool.Imported())
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\s*=.*", line):
            continue
        words = line.split(None, 3)
        if len(words) == 4 and (period := run_parts_folder(("/bin/sh", "-c", words[3]))) is not None:
            src.mapped.append((number, f"runs /etc/cron.{period} with run-parts: the folder's scripts are imported once, "
                                       "from the folder, at the time of the /etc/crontab line that runs it"))
        else:
            src.imported.problems.append(tool.Problem(number, "anacron runs a job once every N days counted from its "
                                                      "last run, which is no calendar: translate it by hand (a schedule "
                                                      "with persistent: true)"))
    return src


def _settle(src: Source, taken: set[str]) -> None:
    """Unique names across the host, then the manifest (what jobgen's validator refuses is
    reported by line, as the single-file import does)."""
    renamed = []
    for job in src.imported.jobs:
        name = tool.unique_name(job.name, taken)
        taken.add(name)
        renamed.append(tool.ImportedJob(**{**job.__dict__, "name": name}))
    src.imported.jobs = renamed
    if not src.imported.jobs or src.manifest is None:
        src.manifest = None
        return
    try:
        src.text = tool.settle(src.imported, src.path, src.manifest)
    except ManifestError as exc:  # jobgen's own bug: said, and the rest of the host imported
        src.imported.problems.append(tool.Problem(0, f"jobgen's translation does not validate (a bug in jobgen): {exc}"))
        src.imported.jobs, src.text = [], None
    if not src.imported.jobs:
        src.manifest, src.text = None, None


def _report(out: HostImport, cron) -> list[str]:
    lines = [f"{u.path}: {IGNORED}: {u.reason}" for u in cron.skipped]
    lines += [f"{u.path}: {REFUSED}: {u.reason}" for u in cron.unread]
    out.refused += len(cron.unread)
    for src in out.sources:
        rows: list[tuple[int, str]] = []
        rows += [(line, f"{src.path}:{line}: {MAPPED}: {what}") for line, what in src.mapped]
        for p in src.imported.problems:
            rows.append((p.line, f"{src.path}:{p.line}: {REFUSED}: {p.message}" if p.line else f"{src.path}: {REFUSED}: {p.message}"))
        rows += [(n.line, f"{src.path}:{n.line}: note: {n.message}") for n in src.imported.notes]
        for job in src.imported.jobs:
            where = f"{src.path}:{job.line}" if not job.source.startswith("/etc/cron.") else f"{src.path}/{job.command[0].rsplit('/', 1)[-1]}"
            rows.append((job.line, f"{where}: {TRANSLATED}: {job.name} in {src.manifest}"))
            rows += [(job.line, f"{where}: {REVIEW}: {job.name}: {d}") for d in src.dst.get(job.line, [])]
        lines += [text for _, text in sorted(rows, key=lambda r: r[0])]
        if src.imported.jobs:
            lines.append(f"{src.path}: {REVIEW}: {len(src.imported.jobs)} job{'s' if len(src.imported.jobs) != 1 else ''} "
                         f"in {src.manifest}: {_REVIEW_ALWAYS}")
        out.refused += len(src.imported.problems)
        out.jobs += len(src.imported.jobs)
    return lines
