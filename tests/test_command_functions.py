"""Every `jobgen COMMAND` is a plain function of its module: cli/COMMAND.py's ``register``
only declares the options, and the command's body is one statement that hands them to
the module-level function named for the command, whose return value is the exit code.
That function is what a test calls without the command line (tests/test_policy_commands.py)."""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap

import pytest
import typer.main

from jobgen.cli.app import COMMANDS, app


def commands() -> dict[str, object]:
    return typer.main.get_command(app()).commands


@pytest.mark.parametrize("name", sorted(commands()))
def test_the_command_body_only_calls_its_modules_function(name: str) -> None:
    callback = inspect.unwrap(commands()[name].callback)
    tree = ast.parse(textwrap.dedent(inspect.getsource(callback)))
    (function,) = tree.body
    body = function.body[1:] if isinstance(function.body[0].value, ast.Constant) else function.body  # after the help text
    # raise typer.Exit(NAME(...)): nothing else runs in the closure
    (statement,) = body
    assert isinstance(statement, ast.Raise) and ast.unparse(statement.exc.func) == "typer.Exit"
    (call,) = statement.exc.args
    called = call.func.id
    assert called == name.replace("-", "_")
    module = importlib.import_module(callback.__module__)
    target = getattr(module, called)
    assert inspect.isfunction(target) and target.__module__ == module.__name__
    assert inspect.signature(target).return_annotation in ("int", int)


def test_every_command_module_is_checked() -> None:
    modules = {inspect.unwrap(c.callback).__module__ for c in commands().values()}
    assert modules == {f"jobgen.cli.{name}" for name in COMMANDS}


def test_a_command_function_runs_without_the_command_line(tmp_path, capsys) -> None:
    from jobgen.cli import check
    from jobgen.cli.exits import EXIT_OK

    manifest = tmp_path / "shop.yaml"
    manifest.write_text("jobgen: 1\ntarget: {systemd: '252'}\njobs:\n  tick:\n    command: [/bin/true]\n    schedule: daily\n")
    assert check.check([manifest], quiet=True) == EXIT_OK
    assert capsys.readouterr() == ("", "")
