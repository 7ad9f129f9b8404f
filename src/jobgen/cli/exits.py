"""jobgen's own exit codes (README "Exit codes"); a job's or a lock holder's codes pass through."""

EXIT_OK = 0
EXIT_DRIFT = 1  # --check: something would change
EXIT_INVALID = 2  # invalid manifest, bad usage or bad target
EXIT_PARTIAL = 3  # apply: applied, but a unit failed to start or stop (named)
EXIT_REFUSED = 4  # apply: not root, no running systemd, or a file jobgen did not write; nothing changed
