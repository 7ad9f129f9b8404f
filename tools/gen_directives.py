#!/usr/bin/env python3
"""Generate src/jobgen/compiler/directive_table.py from systemd's own sources.

jobgen must know, for every unit-file directive, which systemd releases accept
it.  The man pages' "Added in version N" notes are wrong for about a third of
the directives, so this script reads the truth: the unit-file parser table of
every systemd release tag.

Usage (from the repository root)::

    python tools/gen_directives.py --git-dir /path/to/systemd.git \\
        --output src/jobgen/compiler/directive_table.py

``--git-dir`` is any git directory holding systemd's release tags (a bare
clone is enough; no work tree is needed: files are read with
``git show TAG:path``).  https://github.com/yuwata/systemd carries upstream's
tags and is much smaller than systemd/systemd.  ``--first`` (default 230) and
``--last`` (default: the newest ``vNNN`` tag present) bound the releases read.

What is read, per major release tag ``vNNN``:

* ``src/core/load-fragment-gperf.gperf.m4`` (up to v248) or
  ``src/core/load-fragment-gperf.gperf.in`` (v249 on): the table PID 1 uses to
  parse unit files.  Its per-unit-type macros (EXEC_CONTEXT_CONFIG_ITEMS,
  KILL_CONTEXT_CONFIG_ITEMS, CGROUP_CONTEXT_CONFIG_ITEMS; m4 ``$1`` or jinja
  ``{{type}}``) are expanded into the real sections (Service, Socket, Mount,
  Swap, Scope, Slice).  Build-option conditionals (``m4_ifdef(`HAVE_SECCOMP'``,
  ``{% if HAVE_PAM %}``) take the enabled branch: distributions build with
  them, and the disabled branch only lists the same keys as
  ``config_parse_warn_compat, DISABLED_CONFIGURATION``.
* ``src/shared/install.c``: the ``[Install]`` keys ``systemctl enable`` reads.
  An ``[Install]`` key counts from the first release where both tables have it.
* A few value-level facts (``VALUE_PROBES`` below): a regular expression over
  ``src/`` whose first matching release is when a value became accepted.

Per (section, directive) the output records ``since`` (first release whose
parser accepts it; FIRST_RELEASE means "this release or older"),
``deprecated`` (first release where the parser maps it to a warning-only
parser: ``config_parse_warn_compat`` with ``DISABLED_LEGACY``, or
``config_parse_obsolete_*``) and ``removed`` (first release whose table no
longer has it).  The output is sorted and carries no timestamps: the same tags
give the same bytes.  See docs/directives.md.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_FIRST = 230
DEFAULT_SOURCE_URL = "https://github.com/yuwata/systemd"
GPERF_M4 = "src/core/load-fragment-gperf.gperf.m4"
GPERF_IN = "src/core/load-fragment-gperf.gperf.in"
INSTALL_C = "src/shared/install.c"

# Parser functions that accept a key only to warn about it (conf-parser.c,
# load-fragment.c): the key is recognised but no longer does what it did.
WARN_ONLY = {
    ("config_parse_warn_compat", "DISABLED_LEGACY"),
    ("config_parse_warn_compat", "DISABLED_EXPERIMENTAL"),
}
OBSOLETE_PREFIX = "config_parse_obsolete_"

# Value-level facts: (section, directive, value, pathspec, regex).  The first
# release where `git grep -E regex TAG -- pathspec` matches is when systemd
# started accepting the value.  Keep each regex anchored on a string table
# entry or a parser branch so it cannot match by accident.
VALUE_PROBES: tuple[tuple[str, str, str, str, str], ...] = (
    ("Service", "Type", "exec", "src/core/service.c", r'\[SERVICE_EXEC\] *= *"exec"'),
    ("Service", "Type", "notify-reload", "src/core/service.c",
     r'\[SERVICE_NOTIFY_RELOAD\] *= *"notify-reload"'),
    # service_verify(): before 244 any Restart= other than "no" was refused
    # for Type=oneshot; 244 refuses only always/on-success.
    ("Service", "Restart", "on-failure with Type=oneshot", "src/core/service.c",
     r"Restart= set to either always or on-success"),
    ("Service", "KillMode", "mixed", "src/core", r'\[KILL_MIXED\] *= *"mixed"'),
    # config_parse_exec(): command-line prefixes.
    ("Service", "ExecStart", "prefix +", "src/core/load-fragment.c", r"\*f == '\+'"),
    ("Service", "ExecStart", "prefix !", "src/core/load-fragment.c", r"\*f == '!'"),
    ("Service", "ExecStart", "prefix !!", "src/core/load-fragment.c",
     r"EXEC_COMMAND_AMBIENT_MAGIC|ambient_hack"),
    ("Service", "ExecStart", "prefix :", "src/core/load-fragment.c", r"\*f == ':'"),
    ("Service", "ExecStart", "prefix |", "src/core/load-fragment.c", r"\*f == '\|'"),
    ("Service", "StandardOutput", "file:", "src/core", r'\[EXEC_OUTPUT_FILE\] *= *"file"'),
    ("Service", "StandardOutput", "append:", "src/core", r'\[EXEC_OUTPUT_FILE_APPEND\] *= *"append"'),
    ("Service", "StandardOutput", "truncate:", "src/core",
     r'\[EXEC_OUTPUT_FILE_TRUNCATE\] *= *"truncate"'),
    ("Service", "ProtectSystem", "strict", "src/core", r'\[PROTECT_SYSTEM_STRICT\] *= *"strict"'),
    ("Service", "ProtectHome", "tmpfs", "src/core", r'\[PROTECT_HOME_TMPFS\] *= *"tmpfs"'),
    ("Service", "PrivateTmp", "disconnected", "src/core",
     r'\[PRIVATE_TMP_DISCONNECTED\] *= *"disconnected"'),
    ("Service", "PrivateUsers", "self", "src/core", r'\[PRIVATE_USERS_SELF\] *= *"self"'),
    ("Service", "PrivateUsers", "identity", "src/core",
     r'\[PRIVATE_USERS_IDENTITY\] *= *"identity"'),
    ("Service", "ProtectControlGroups", "private", "src/core",
     r'\[PROTECT_CONTROL_GROUPS_PRIVATE\] *= *"private"'),
    ("Service", "ProtectControlGroups", "strict", "src/core",
     r'\[PROTECT_CONTROL_GROUPS_STRICT\] *= *"strict"'),
    # calendarspec.c: "Mon *-*-* 12:00 Europe/Berlin" (time zone suffix) and
    # "*-*~01" (days counted from the end of the month).
    ("Timer", "OnCalendar", "time zone", "src/*/calendarspec.c", r"c->timezone *= "),
    ("Timer", "OnCalendar", "~ (from end of month)", "src/*/calendarspec.c", r"'~'"),
)

# --- reading git ---------------------------------------------------------


def git(git_dir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), *args],
        check=True, capture_output=True, text=True,
    ).stdout


def major_tags(git_dir: Path, first: int, last: int | None) -> list[int]:
    versions = sorted(
        int(t[1:]) for t in git(git_dir, "tag", "--list", "v*").split()
        if re.fullmatch(r"v\d+", t)
    )
    upper = last if last is not None else versions[-1]
    chosen = [v for v in versions if first <= v <= upper]
    missing = sorted(set(range(first, upper + 1)) - set(chosen))
    if missing:
        sys.exit(f"gen_directives: tags missing from {git_dir}: {missing}")
    return chosen


def show(git_dir: Path, tag: int, path: str) -> str | None:
    try:
        return git(git_dir, "show", f"v{tag}:{path}")
    except subprocess.CalledProcessError:
        return None


# --- parsing the parser table -------------------------------------------

ENTRY = re.compile(
    r"^`?(?P<section>\$1|\{\{type\}\}|[A-Z][A-Za-z]*)\.(?P<key>[A-Za-z0-9]+)\s*,"
    r"\s*(?P<func>[A-Za-z0-9_]+)\s*,\s*(?P<ltype>[^,]*),"
)
M4_DEFINE = re.compile(r"^m4_define\(`(?P<name>[A-Z_]+)',")
M4_CALL = re.compile(r"^(?P<name>[A-Z_]+_CONFIG_ITEMS)\((?P<arg>[A-Za-z]+)\)m4_dnl$")
JINJA_MACRO = re.compile(r"^\{%-? macro (?P<name>[A-Z_]+)\(type\) -?%\}$")
JINJA_CALL = re.compile(r"^\{\{ (?P<name>[A-Z_]+)\('(?P<arg>[A-Za-z]+)'\) \}\}$")
IGNORED_LINE = re.compile(
    r"^(m4_dnl.*|\{#.*#\}|%.*|#.*|struct ConfigPerfItem;|_Pragma.*|)$"
)


@dataclass(frozen=True)
class Entry:
    section: str
    key: str
    func: str
    ltype: str

    @property
    def warn_only(self) -> bool:
        return (self.func, self.ltype) in WARN_ONLY or self.func.startswith(OBSOLETE_PREFIX)


def parse_gperf(text: str, where: str) -> dict[tuple[str, str], Entry]:
    """Expand one release's parser table into {(section, key): Entry}.

    Understands exactly the constructs systemd's tables use; anything else is
    an error so that a future change in the file's shape is noticed, not
    silently misread.
    """
    macros: dict[str, list[Entry]] = {}
    current_macro: str | None = None
    # Stack of conditional states: "then" or "else" (skip "else").
    cond: list[str] = []
    out: dict[tuple[str, str], Entry] = {}
    in_body = False  # after the first "%%"

    def emit(entries: list[Entry]) -> None:
        if current_macro is not None:
            macros[current_macro].extend(entries)
        else:
            for e in entries:
                out[(e.section, e.key)] = e

    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not in_body:
            in_body = line == "%%" or bool(M4_DEFINE.match(line) or JINJA_MACRO.match(line))
            if not in_body:
                continue
        if line == "%%":
            continue
        # --- conditionals
        if line.startswith("m4_ifdef(`"):
            cond.append("then")
            continue
        if line.startswith("{% if ") or line.startswith("{%- if "):
            cond.append("then")
            continue
        if line in ("{% else %}", "{%- else %}"):
            cond[-1] = "else"
            continue
        if line in ("{% endif %}", "{%- endif %}"):
            cond.pop()
            continue
        # --- macro definitions and calls
        if m := M4_DEFINE.match(line):
            current_macro = m["name"]
            macros[current_macro] = []
            line = line[m.end():].strip()
            if not line:
                continue
        elif m := JINJA_MACRO.match(line):
            current_macro = m["name"]
            macros[current_macro] = []
            continue
        elif line in ("{%- endmacro -%}", "{% endmacro %}") or (line == ")m4_dnl" and not cond):
            current_macro = None
            continue
        elif m := (M4_CALL.match(line) or JINJA_CALL.match(line)):
            emit([Entry(m["arg"], e.key, e.func, e.ltype) for e in macros[m["name"]]])
            continue
        if IGNORED_LINE.match(line):
            continue
        m = ENTRY.match(line)
        if not m:
            raise SystemExit(f"gen_directives: {where}:{lineno}: cannot read line: {raw!r}")
        skipping = bool(cond) and cond[-1] == "else"
        if not skipping:
            section = m["section"]
            if section in ("$1", "{{type}}") and current_macro is None:
                raise SystemExit(f"gen_directives: {where}:{lineno}: placeholder outside a macro")
            emit([Entry(section, m["key"], m["func"], m["ltype"].strip())])
        # m4 conditionals: "...'," ends the then-branch, "...')" ends the
        # conditional (an else-branch, or a then-branch with no else).
        tail = line.rstrip()
        if cond and tail.endswith("',"):
            cond[-1] = "else"
        elif cond and (tail.endswith("')") or tail.endswith("')'")):
            cond.pop()
    if cond or current_macro is not None:
        raise SystemExit(f"gen_directives: {where}: unbalanced conditional or macro")
    return out


INSTALL_ITEM = re.compile(r'\{\s*"Install",\s*"(?P<key>[A-Za-z]+)",')


def parse_install(text: str) -> set[str]:
    return {m["key"] for m in INSTALL_ITEM.finditer(text)}


def release_keys(gperf_text: str, install_text: str, where: str) -> dict[tuple[str, str], bool]:
    """One release's usable keys: {(section, key): warn_only}, from its parser table and
    install.c (a git tag's, or an unpacked source tree's: tests/test_directive_table.py)."""
    table = parse_gperf(gperf_text, where)
    install_keys = parse_install(install_text)
    gperf_install = {k for (s, k) in table if s == "Install"}
    if gperf_install != install_keys:
        print(f"gen_directives: note: {where} [Install] differs: parser table "
              f"{sorted(gperf_install)} install.c {sorted(install_keys)}", file=sys.stderr)
    # An [Install] key is usable only where both PID 1 (which must not
    # warn) and systemctl enable (which acts on it) know it.
    return {k: e.warn_only for k, e in table.items() if k[0] != "Install" or k[1] in install_keys}


def probe_tree(root: Path) -> set[tuple[str, str, str]]:
    """The VALUE_PROBES that match in one unpacked source tree, as `git grep` matches them
    at a tag: a pathspec is a file, a folder (everything under it) or a glob."""
    hits = set()
    for section, directive, value, pathspec, regex in VALUE_PROBES:
        if (root / pathspec).is_dir():
            files = [p for p in (root / pathspec).rglob("*") if p.is_file()]
        else:
            files = list(root.glob(pathspec))
        pattern = re.compile(regex)
        if any(pattern.search(f.read_text(errors="replace")) for f in files):
            hits.add((section, directive, value))
    return hits


def gperf_path(tag: int) -> str:
    return GPERF_M4 if tag <= 248 else GPERF_IN


# --- turning per-release tables into rows --------------------------------


@dataclass
class Row:
    section: str
    name: str
    since: int
    deprecated: int | None
    removed: int | None


def history(tags: list[int], present: dict[int, dict[tuple[str, str], bool]]) -> list[Row]:
    """present[tag][(section, key)] = warn_only flag for keys in that release."""
    keys = sorted({k for table in present.values() for k in table})
    rows = []
    for key in keys:
        seen = [t for t in tags if key in present[t]]
        since = seen[0]
        after = [t for t in tags if t > seen[-1]]
        removed = after[0] if after else None
        gaps = [t for t in tags if since < t < seen[-1] and key not in present[t]]
        warned = [t for t in seen if present[t][key]]
        deprecated = warned[0] if warned else None
        if gaps:
            print(f"gen_directives: note: {key[0]}.{key[1]} missing in {gaps}, "
                  f"present {since}..{seen[-1]}", file=sys.stderr)
        if warned and warned != [t for t in seen if t >= warned[0]]:
            print(f"gen_directives: note: {key[0]}.{key[1]} warn-only in {warned} only",
                  file=sys.stderr)
        rows.append(Row(key[0], key[1], since, deprecated, removed))
    return rows


def probe_values(git_dir: Path, tags: list[int]) -> list[tuple[str, str, str, int, int | None, str]]:
    rows = []
    for section, directive, value, pathspec, regex in VALUE_PROBES:
        hits: dict[int, str] = {}
        try:
            found = git(git_dir, "grep", "-l", "-E", regex, *[f"v{t}" for t in tags], "--", pathspec)
        except subprocess.CalledProcessError:
            found = ""
        for line in found.splitlines():
            tag, path = line.split(":", 1)
            hits.setdefault(int(tag[1:]), path)
        if not hits:
            raise SystemExit(f"gen_directives: value probe never matched: {section}.{directive}={value}")
        since = min(hits)
        after = [t for t in tags if t > max(hits)]
        rows.append((section, directive, value, since, after[0] if after else None,
                     f"{hits[since]}@v{since}"))
    return sorted(rows)


# --- output ----------------------------------------------------------------

HEADER = '''\
"""systemd unit-file directives by release, measured from systemd's own parser.

GENERATED by tools/gen_directives.py -- do not edit by hand; regenerate with:

    python tools/gen_directives.py --git-dir SYSTEMD_GIT_DIR --first {first} --output src/jobgen/compiler/directive_table.py

Source repository: {url} (systemd's release tags; v{last} is commit {last_commit})
Releases read: v{first} .. v{last} (major tags vNNN only)
Parser table: {m4} (v{first}..v248), {gin} (v249..v{last});
[Install] keys also checked against {install}.

Directive.since: first release whose unit-file parser accepts the key in that
section; {first} means "{first} or older" (older releases were not read).
Directive.deprecated: first release whose parser only warns about the key
(config_parse_warn_compat DISABLED_LEGACY, or config_parse_obsolete_*).
Directive.removed: first release whose parser table no longer has the key.
Value rows come from the regular expressions in tools/gen_directives.py
(VALUE_PROBES); their source names the file and release that first matched.
See docs/directives.md.
"""

from __future__ import annotations

from typing import NamedTuple

FIRST_RELEASE = {first}
LAST_RELEASE = {last}
SOURCE_REPOSITORY = "{url}"


def parser_table_path(release: int) -> str:
    """The parser table file systemd had at `release`."""
    return "{m4}" if release <= 248 else "{gin}"


class Directive(NamedTuple):
    section: str
    name: str
    since: int
    deprecated: int | None
    removed: int | None

    @property
    def source(self) -> str:
        return f"{{parser_table_path(self.since)}}@v{{self.since}}"


class Value(NamedTuple):
    section: str
    directive: str
    value: str
    since: int
    removed: int | None
    source: str


'''


def render(rows: list[Row], values, first: int, last: int, url: str, last_commit: str) -> str:
    out = [HEADER.format(first=first, last=last, url=url, last_commit=last_commit,
                         m4=GPERF_M4, gin=GPERF_IN, install=INSTALL_C)]
    out.append("DIRECTIVES: tuple[Directive, ...] = (\n")
    for r in sorted(rows, key=lambda r: (r.section, r.name)):
        out.append(f"    Directive({r.section!r}, {r.name!r}, since={r.since}, "
                   f"deprecated={r.deprecated}, removed={r.removed}),\n".replace("'", '"'))
    out.append(")\n\nVALUES: tuple[Value, ...] = (\n")
    for section, directive, value, since, removed, source in values:
        out.append(f"    Value({section!r}, {directive!r}, {value!r}, since={since}, "
                   f"removed={removed}, source={source!r}),\n".replace("'", '"'))
    out.append(")\n")
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", required=True, type=Path,
                    help="git directory with systemd's release tags (bare is fine)")
    ap.add_argument("--first", type=int, default=DEFAULT_FIRST)
    ap.add_argument("--last", type=int, default=None, help="default: newest vNNN tag")
    ap.add_argument("--source-url", default=DEFAULT_SOURCE_URL,
                    help="recorded in the header (the git dir may be a local mirror)")
    ap.add_argument("--output", type=Path, default=None, help="default: stdout")
    args = ap.parse_args(argv)

    tags = major_tags(args.git_dir, args.first, args.last)
    present: dict[int, dict[tuple[str, str], bool]] = {}
    for tag in tags:
        path = gperf_path(tag)
        text = show(args.git_dir, tag, path)
        if text is None:
            sys.exit(f"gen_directives: v{tag} has no {path}")
        present[tag] = release_keys(text, show(args.git_dir, tag, INSTALL_C) or "", f"{path}@v{tag}")
    rows = history(tags, present)
    values = probe_values(args.git_dir, tags)
    last_commit = git(args.git_dir, "rev-parse", f"v{tags[-1]}^{{commit}}").strip()
    text = render(rows, values, tags[0], tags[-1], args.source_url, last_commit)
    if args.output:
        args.output.write_text(text)
        print(f"gen_directives: wrote {len(rows)} directives, {len(values)} values "
              f"(v{tags[0]}..v{tags[-1]}) to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
