"""jobgen: compile a YAML job manifest into systemd units."""

__version__ = "0.1.0"
