"""Version gates, feature by feature: (manifest feature, target) -> what jobgen does.

  allowed   the directive is written
  fallback  the documented fallback is written, and a note says so
  error     a positioned error names the job, the key and the release needed

Ranges count: a directive is allowed only if every release in the range has it.
"""

import pytest

from jobgen.compiler import pipeline
from jobgen.compiler.diagnostics import ManifestError
from jobgen.compiler.target import parse_target

JOB = "jobgen: 1\njobs:\n  j:\n    command: [/bin/true]\n    schedule: daily\n"
WORKER = "jobgen: 1\nworkers:\n  w:\n    command: [/bin/true]\n    stop_timeout: 10s\n"

# feature: (manifest, directive line it asks for, file it lands in)
FEATURES = {
    "defer (overlap: skip)": (JOB, "DeferReactivation=yes", "j.timer"),
    "randomized_offset": (JOB + "    randomized_offset: 5min\n", "RandomizedOffsetSec=5min", "j.timer"),
    "fixed_random_delay": (JOB + "    randomized_delay: 1min\n    fixed_random_delay: true\n", "FixedRandomDelay=yes", "j.timer"),
    "on_success": (JOB + "    on_success: ok.service\n", "OnSuccess=ok.service", "j.service"),
    "timezone": (JOB + "    timezone: Europe/Berlin\n", "OnCalendar=*-*-* 00:00:00 Europe/Berlin", "j.timer"),
    "credential": (JOB + "    lock: {scope: cluster, name: x, backend: 'redis://h/0', credential: 'p:/etc/p'}\n",
                   "LoadCredential=p:/etc/p", "j.service"),
    "type: exec": (WORKER, "Type=exec", "w.service"),
    "restart backoff": (WORKER + "    restart_steps: 3\n    restart_max_delay: 1min\n", "RestartSteps=3", "w.service"),
    "hardening strict (ProtectProc)": (JOB + "    hardening: strict\n", "ProtectProc=invisible", "j.service"),
}

CASES = [
    # feature, target, expected
    ("defer (overlap: skip)", "257", "allowed"),
    ("defer (overlap: skip)", ">=257,<262", "allowed"),
    ("defer (overlap: skip)", ">=252", "fallback"),
    ("defer (overlap: skip)", ">=252,<258", "fallback"),
    ("randomized_offset", "258", "allowed"),
    ("randomized_offset", ">=257", "error"),
    ("randomized_offset", "debian-13", "error"),
    ("fixed_random_delay", "247", "allowed"),
    ("fixed_random_delay", "245", "error"),
    ("on_success", "249", "allowed"),
    ("on_success", "ubuntu-22.04", "allowed"),
    ("on_success", ">=247,<250", "error"),
    ("timezone", "235", "allowed"),
    ("timezone", "234", "error"),
    ("credential", "247", "allowed"),
    ("credential", "ubuntu-20.04", "error"),
    ("type: exec", "240", "allowed"),
    ("type: exec", "239", "fallback"),
    ("restart backoff", "254", "allowed"),
    ("restart backoff", ">=252,<258", "fallback"),
    ("hardening strict (ProtectProc)", "247", "allowed"),
    ("hardening strict (ProtectProc)", "245", "fallback"),
]


def outcome(feature: str, target: str) -> str:
    text, line, filename = FEATURES[feature]
    try:
        result = pipeline.build("m.yaml", parse_target(target), text=text)
    except ManifestError as exc:
        (error,) = [d for d in exc.diagnostics if d.severity == "error"]
        assert error.message.startswith(("job 'j': ", "worker 'w': ")) and "needs systemd >=" in error.message
        return "error"
    unit = result.files[filename].decode()
    if line in unit.splitlines():
        return "allowed"
    assert any(d.severity == "note" for d in result.diagnostics), "a fallback must be reported"
    return "fallback"


@pytest.mark.parametrize("feature,target,expected", CASES, ids=[f"{f}@{t}" for f, t, _ in CASES])
def test_gate(feature: str, target: str, expected: str) -> None:
    assert outcome(feature, target) == expected
