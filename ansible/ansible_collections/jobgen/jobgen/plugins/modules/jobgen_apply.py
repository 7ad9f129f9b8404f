#!/usr/bin/python
# Copyright (c) 2026 jobgen developers
# MIT License (see LICENSE in this collection or https://opensource.org/license/mit)
"""Ansible module: install jobgen manifests on the managed host with `jobgen apply`.

The module is a thin translation of `jobgen apply --format json` (one JSON document on
stdout, whatever the outcome) onto Ansible's result: jobgen decides what changes, which
systemctl calls are needed and in which order; the module maps check mode to `--check`,
diff mode to a `--diff` preview before the apply, and jobgen's exit codes to ok / failed,
with jobgen's own words for what went wrong.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: jobgen_apply
short_description: Install jobgen job manifests as systemd units (jobgen apply)
description:
  - Runs C(jobgen apply --format json) on the managed host. jobgen writes the units and the
    tmpfiles.d snippet where systemd reads them, creates the lock files, reloads systemd,
    enables and starts new timers and worker targets, restarts changed workers, and stops
    and removes jobs that left the manifest (stop before delete).
  - Idempotent; C(changed) is jobgen's own answer, so no C(changed_when) is needed.
  - jobgen must be installed on the managed host.
version_added: "0.1.0"
options:
  manifests:
    description: Manifest files on the managed host.
    type: list
    elements: path
    required: true
  root:
    description:
      - Install into this image root (C(--root)) instead of the running system. No running
        systemd is touched; timers and targets are enabled the way C(systemctl --root) does.
    type: path
  layout:
    description: Unit folders under the root, C(etc) (/etc/systemd/system) or C(usr) (/usr/lib/systemd/system).
    type: str
    choices: [etc, usr]
  restart:
    description: Restart workers whose unit changed (C(changed)) or leave them (C(never)).
    type: str
    choices: [changed, never]
  stop_timeout:
    description: Seconds to wait for a running job of a removed timer before giving up (C(--stop-timeout), a fraction is allowed).
    type: float
  systemd:
    description: Target systemd version (C(--systemd)); C(auto) reads the host's. Needed with I(root) unless the manifest names one.
    type: str
  executable:
    description: Path of jobgen on the managed host; found on C(PATH) when not given.
    type: path
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
notes:
  - Check mode runs C(jobgen apply --check), which changes nothing and reports what would change, including the systemctl calls.
  - Diff mode runs C(jobgen apply --diff) (which changes nothing) for the unified diff of every unit file, then, unless in check mode, the apply itself.
author:
  - jobgen developers (@jobgen)
"""

EXAMPLES = r"""
- name: Install the shop's jobs
  jobgen.jobgen.jobgen_apply:
    manifests:
      - /etc/jobgen/shop.yaml

- name: Prepare an image root (no running systemd touched)
  jobgen.jobgen.jobgen_apply:
    manifests: [/srv/image/shop.yaml]
    root: /srv/image/rootfs
    systemd: "252"
"""

RETURN = r"""
changed:
  description: Whether any file or unit state changed (would change, in check mode).
  type: bool
  returned: always
files:
  description: Every file jobgen considered, with its action (create, update, identical, remove).
  type: list
  elements: dict
  returned: success
  sample: [{"path": "/etc/systemd/system/backup.timer", "action": "create"}]
actions:
  description: The state-changing systemctl / systemd-tmpfiles calls done (or that would be done in check mode), with why.
  type: list
  elements: dict
  returned: success
  sample: [{"argv": ["systemctl", "enable", "--now", "backup.timer"], "why": "new timer"}]
diagnostics:
  description: jobgen's notes, warnings and errors, each with file, line, col, severity and message.
  type: list
  elements: dict
  returned: always
cmd:
  description: The jobgen command line that ran.
  type: list
  elements: str
  returned: always
exit_status:
  description: jobgen's exit code (1 in check mode means "would change").
  type: int
  returned: always
ansible_facts:
  description: C(jobgen_apply) with the same files, actions and changed.
  type: dict
  returned: success
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

# The JSON document `jobgen apply --format json` prints (its "format" field).
FORMAT = 1

# The fields of jobgen's answer this module reads, with their type ("error": the answer of
# a run that failed before apply began, README "Other ways to deploy").
SHAPE = {"changed": bool, "files": list, "actions": list, "diagnostics": list, "errors": list, "error": str, "diff": str, "outcome": str}
LISTS_OF_OBJECTS = ("files", "actions", "diagnostics")
KINDS = {bool: "a boolean", list: "an array", str: "a string"}
JSON_NAMES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}

# module option -> jobgen apply flag, for the options passed only when set
FLAGS = {"root": "--root", "layout": "--layout", "restart": "--restart", "stop_timeout": "--stop-timeout", "systemd": "--systemd"}


def command(module: AnsibleModule) -> list[str]:
    params = module.params
    jobgen = params["executable"] or "jobgen"
    if os.sep not in jobgen:  # a bare name is looked up on PATH, as a shell would
        jobgen = module.get_bin_path(jobgen, required=True)
    if not (os.path.isfile(jobgen) and os.access(jobgen, os.X_OK)):
        # run_command would only say "Error executing command."
        module.fail_json(msg=f"executable {jobgen}: no such executable file on the managed host (jobgen must be installed there)", cmd=[jobgen])
    argv = [jobgen, "apply", "--format", "json"]
    for option, flag in FLAGS.items():
        if params[option] is not None:
            argv += [flag, str(params[option])]
    if module.check_mode:
        argv.append("--check")
    # after "--", a manifest whose path starts with "-" is a manifest, never an option
    return [*argv, "--", *params["manifests"]]


def preview(module: AnsibleModule, argv: list[str]) -> str:
    """The unified diff of what `argv` will change: `jobgen apply --diff`, which changes nothing.

    In Ansible, diff mode only shows; check mode decides whether anything changes. jobgen's
    --diff is a dry run, so it is run first, on its own, and the real apply (unless in check
    mode) after it.
    """
    end = argv.index("--")
    argv = [*argv[:end], "--diff", *argv[end:]]
    rc, out, err = module.run_command(argv)
    doc = parse(module, argv, rc, out, err)
    if rc not in (0, 1):
        fail(module, rc, doc, err, dict(changed=False, cmd=argv, exit_status=rc, diagnostics=doc["diagnostics"]))
    return doc.get("diff") or ""


def parse(module: AnsibleModule, argv: list[str], rc: int, out: str, err: str) -> dict:
    def refuse(what: str) -> None:
        module.fail_json(msg=f"jobgen apply printed {what} (exit {rc})", cmd=argv, exit_status=rc, stdout=out, stderr=err)

    try:
        doc = json.loads(out)
    except ValueError:
        refuse("no JSON document")
    if not isinstance(doc, dict):
        refuse(f"a JSON {JSON_NAMES.get(type(doc), 'value')}, not the object of format {FORMAT} this module reads")
    if doc.get("format") != FORMAT:
        refuse(f"format {doc.get('format')!r}; this module reads format {FORMAT}")
    # a jobgen that is not the one this module was written for may print other shapes:
    # a field of the wrong type is named, never a crash of the module nor a false success
    for field, kind in SHAPE.items():
        if not isinstance(doc.setdefault(field, kind()), kind):
            refuse(f"{field!r} as a JSON {JSON_NAMES.get(type(doc[field]), 'object')}, not {KINDS[kind]}")
    for field in LISTS_OF_OBJECTS:
        if not all(isinstance(item, dict) for item in doc[field]):
            refuse(f"{field!r} with an item that is not an object")
    return doc


def fail(module: AnsibleModule, rc: int, doc: dict, err: str, result: dict) -> None:
    # what the exit code means is jobgen's word ("outcome"), not a table kept here
    reason = f"jobgen apply exited {rc}: {doc['outcome']}" if doc["outcome"] else f"jobgen apply exited {rc}"
    module.fail_json(msg="\n".join([reason, *diagnostic_lines(doc)]), errors=doc["errors"], stderr=err, **result)


def diagnostic_line(d: dict) -> str:
    return f"{d.get('file')}:{d.get('line')}:{d.get('col')}: {d.get('severity')}: {d.get('message')}"


def diagnostic_lines(doc: dict) -> list[str]:
    # "errors" is apply's own list; "error" is the one line of jobgen's answer to anything
    # apply itself did not get to run (usage, a bad --systemd, an internal error)
    lines = [diagnostic_line(d) for d in doc["diagnostics"]] + [str(e) for e in doc["errors"]]
    return lines + ([doc["error"]] if doc["error"] else [])


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            manifests=dict(type="list", elements="path", required=True),
            root=dict(type="path"),
            layout=dict(type="str", choices=["etc", "usr"]),
            restart=dict(type="str", choices=["changed", "never"]),
            # jobgen reads seconds with a fraction (--stop-timeout 0.5)
            stop_timeout=dict(type="float"),
            systemd=dict(type="str"),
            executable=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    argv = command(module)
    diff = preview(module, argv) if module._diff else ""
    rc, out, err = module.run_command(argv)
    doc = parse(module, argv, rc, out, err)

    # jobgen's warnings (a secret-looking environment value, ...) are shown to whoever runs
    # the playbook, as jobgen shows them on a terminal; notes stay in `diagnostics`
    for d in doc["diagnostics"]:
        if d.get("severity") == "warning":
            module.warn(diagnostic_line(d))
    result = dict(
        changed=doc["changed"],
        files=doc["files"],
        actions=doc["actions"],
        diagnostics=doc["diagnostics"],
        cmd=argv,
        # not `rc`: Ansible fails any task whose result has a non-zero rc, and exit 1 is a
        # success in check mode
        exit_status=rc,
    )
    if diff:
        result["diff"] = {"prepared": diff}
    failed = not (rc == 0 or (rc == 1 and module.check_mode))
    if failed:
        fail(module, rc, doc, err, result)
    result["ansible_facts"] = {"jobgen_apply": {"changed": result["changed"], "files": result["files"], "actions": result["actions"]}}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
