"""TEMPORARY stand-in for `jobgen render`, used only with JOBGEN_E2E_STANDIN=1 while the real
renderer is being written, so the scenarios can be developed against units of the brief's
shape. Delete once `python -m jobgen render` exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

REPORTER = (
    """ExecStopPost=/bin/sh -c 'case "$$SERVICE_RESULT:$$EXIT_STATUS" in """
    """success:0) o=success;; success:75) o={on75};; timeout:*) o=timeout;; *) o=failed;; esac; """
    """printf "SYSLOG_IDENTIFIER=jobgen\\\\nMESSAGE=%%s: %%s\\\\nJOBGEN_JOB=%%s\\\\nJOBGEN_OUTCOME=%%s\\\\n" """
    """"$$1" "$$o" "$$1" "$$o" | logger --journald' sh {job}"""
)


def seconds(span: str) -> int:
    m = re.fullmatch(r"(\d+)\s*(s|min|m|h)?", str(span))
    n, unit = int(m.group(1)), m.group(2) or "s"
    return n * {"s": 1, "min": 60, "m": 60, "h": 3600}[unit]


def quote(word: str) -> str:
    w = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{w}"'


def render(manifest_text: str, release: str, out: Path) -> None:
    m = yaml.safe_load(manifest_text)
    (out / "tmpfiles.d").mkdir(parents=True, exist_ok=True)
    (out / "tmpfiles.d" / "jobgen.conf").write_text("d /run/lock/jobgen 0755 root root -\n")
    for name, job in (m.get("jobs") or {}).items():
        cmd = job["command"] if isinstance(job["command"], list) else shlex.split(job["command"])
        overlap = job.get("overlap", "skip")
        wait = seconds(job["wait_timeout"]) if overlap == "wait" else 0
        mode = f"--wait {wait}" if overlap == "wait" else "--nonblock"
        lines = [
            "[Unit]",
            f"Description={job.get('description', name)}",
            "",
            "[Service]",
            "Type=oneshot",
            f"ExecStart=/usr/bin/flock {mode} --conflict-exit-code 75 /run/lock/jobgen/{name}.lock "
            + " ".join(quote(w) for w in cmd),
            "SuccessExitStatus=75",
            REPORTER.format(job=name, on75="wait-expired" if overlap == "wait" else "skipped"),
        ]
        if "timeout" in job:
            lines.append(f"TimeoutStartSec={seconds(job['timeout']) + wait}")
        (out / f"{name}.service").write_text("\n".join(lines) + "\n")
        timer = ["[Timer]", f"OnCalendar={job['schedule']}", "AccuracySec=1ms"]
        if int(release) >= 257:
            timer.append("DeferReactivation=yes")
        (out / f"{name}.timer").write_text("\n".join(timer) + "\n")
    for name, w in (m.get("workers") or {}).items():
        cmd = w["command"]
        n = int(w.get("instances", 1))
        (out / f"{name}@.service").write_text(
            "\n".join(
                [
                    "[Unit]",
                    f"PartOf={name}.target",
                    f"StartLimitIntervalSec={w.get('start_limit_interval', '10s')}",
                    f"StartLimitBurst={w.get('start_limit_burst', 5)}",
                    "[Service]",
                    "Type=exec",
                    "ExecStart=" + " ".join(quote(x) for x in cmd),
                    f"Restart={w.get('restart', 'on-failure')}",
                    f"RestartSec={w.get('restart_delay', '1s')}",
                    f"TimeoutStopSec={w['stop_timeout']}",
                    "KillMode=mixed",
                    "[Install]",
                    f"WantedBy={name}.target",
                ]
            )
            + "\n"
        )
        wants = " ".join(f"{name}@{i}.service" for i in range(1, n + 1))
        (out / f"{name}.target").write_text(f"[Unit]\nWants={wants}\n")
