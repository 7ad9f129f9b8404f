"""Helpers for jobgen's tests: real tools driven from Python (no mocks)."""
