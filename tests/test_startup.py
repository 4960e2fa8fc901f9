"""Start-up: `hlofuse --help` and `hlofuse rules` import only what they use (a command module
when its command runs; the rules' documentation from the catalogue, not the rules)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from click.testing import CliRunner

from hlofuse import private_files
from hlofuse.cli import COMMANDS, main

from conftest import CHILD_PYTHONPATH, REPO

_PROBE = """
import contextlib, io, json, sys
from hlofuse.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("hlofuse"))))
"""


def _modules_imported(*args: str) -> set[str]:
    env = {**os.environ, "PYTHONPATH": CHILD_PYTHONPATH}
    out = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, env=env,
                         check=True, cwd=REPO)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_help_lists_every_command_of_the_table_in_order():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.output.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == ["parse", "print", *COMMANDS]


def test_help_imports_no_replay_code():
    modules = _modules_imported("--help")
    assert not any(m.startswith(("hlofuse.rules.", "hlofuse.cost", "hlofuse.passes", "hlofuse.pipeline",
                                 "hlofuse.explain", "hlofuse.parse")) for m in modules), sorted(modules)


def test_a_command_imports_its_own_module_only():
    modules = _modules_imported("rules", "--json")
    assert "hlofuse.commands.fuse" in modules
    assert "hlofuse.commands.explain" not in modules and "hlofuse.commands.render" not in modules


def test_rules_reads_the_catalogue_and_imports_no_rule_module():
    _modules_imported("rules")  # the first run builds the catalogue
    modules = _modules_imported("rules")
    # (the registry's package brings its evaluation and candidates modules, which define no rule)
    assert not any(m.startswith(("hlofuse.rules.", "hlofuse.cost", "hlofuse.graph")) for m in modules
                   if m not in ("hlofuse.rules.evaluation", "hlofuse.rules.candidates")), sorted(modules)


def test_the_catalogue_documents_the_rules_as_the_registry_does():
    from hlofuse.rule_catalogue import catalogue
    from hlofuse.rules import load_all

    catalogue()  # built and stored
    stored, registry = catalogue(), load_all()
    # (the registry's order is the order other tests imported the rule modules in)
    assert sorted(stored) == sorted(registry)
    assert {i: r.to_dict() for i, r in stored.items()} == {i: r.to_dict() for i, r in registry.items()}


def test_rules_output_is_the_same_with_and_without_the_catalogue():
    runner = CliRunner()
    for args in (["--json"], [], ["concat", "MOF-*"], ["--pipeline", "cpu", "--json"]):
        cold = runner.invoke(main, ["rules", "--no-cache", *args])
        warm = runner.invoke(main, ["rules", *args])
        assert cold.exit_code == warm.exit_code == 0
        assert cold.output == warm.output


def test_a_corrupted_catalogue_is_discarded_and_rebuilt():
    from hlofuse import rule_catalogue

    rule_catalogue.catalogue()
    folder = private_files.cache_folder(rule_catalogue.FOLDER)
    name = rule_catalogue._entry_name()
    (folder / name).write_bytes(b'[{"id": "FAKE-RULE"}]')  # the seal no longer matches
    result = CliRunner().invoke(main, ["rules", "--json"])
    assert result.exit_code == 0
    assert "FAKE-RULE" not in result.output and len(json.loads(result.output)) > 50


def test_an_unknown_rule_is_one_line_naming_close_matches():
    result = CliRunner().invoke(main, ["rules", "concatt"])
    assert result.exit_code != 0
    assert "no rule matches 'concatt'" in result.output and "concat" in result.output


def test_the_suite_keeps_a_cache_of_its_own():
    """conftest points every test, and the commands they start, at a fresh folder: the user's
    ~/.cache/hlofuse is neither read nor filled."""
    from pathlib import Path

    ours = Path(os.environ[private_files.CACHE_ENV])  # (no test here sets it)
    users = Path(os.path.expanduser("~"), ".cache", "hlofuse")
    assert ours.is_absolute() and ours.name == "hlofuse" and ours != users and users not in ours.parents
    assert ours.parent.name.startswith("hlofuse-tests-")


def test_every_command_module_is_in_the_table():
    """A module of hlofuse.commands whose command is missing from cli.COMMANDS would never be
    imported, and its command never found."""
    import re

    registered = {}
    for path in sorted((REPO / "hlofuse" / "commands").glob("*.py")):
        for name in re.findall(r'@main\.command\("([\w-]+)"\)', path.read_text()):
            registered[name] = path.stem
    assert registered == COMMANDS
