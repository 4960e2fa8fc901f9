"""`make bench` (bench/run.py) and XLA's parser timed beside hlofuse's (bench/parse_speed.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

import parse_speed  # noqa: E402
import run  # noqa: E402


def _options(*argv):
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--300k", dest="with_300k", action="store_true")
    parser.add_argument("--xla-python")
    return parser.parse_args(list(argv))


def test_the_replay_table_has_every_size_and_300k_on_request():
    assert run.arguments("replay_speed.py", ["--pipeline", "all"], _options()) == \
        ["--pipeline", "all", "--sizes", "1000,10000,100000"]
    assert run.arguments("replay_speed.py", [], _options("--300k"))[-1] == "1000,10000,100000,300000"
    assert run.arguments("parse_speed.py", [], _options("--xla-python", "/x/python")) == ["--xla-python", "/x/python"]
    assert [s for s, _ in run.SCRIPTS][:2] == ["replay_speed.py", "parse_speed.py"]


def test_each_script_is_reported_with_its_cpu_time_and_the_load(tmp_path, monkeypatch, capfd):
    (tmp_path / "busy.py").write_text("import os\nsum(range(10**6))\nprint('cache off:', os.environ['HLOFUSE_NO_CACHE'])\n")
    (tmp_path / "broken.py").write_text("raise SystemExit(3)\n")
    monkeypatch.setattr(run, "HERE", tmp_path)
    monkeypatch.setattr(run, "SCRIPTS", [("busy.py", []), ("broken.py", []), ("skipped.py", [])])
    assert run.main(["--only", "busy,broken"]) == 1
    out, err = capfd.readouterr()
    assert out.startswith(f"machine: {os.cpu_count()} CPUs") and "load average" in out.splitlines()[0]
    assert "cache off: 1" in out
    busy = next(line for line in out.splitlines() if line.startswith("-- bench/busy.py:"))
    assert " s wall, " in busy and " s CPU; load average " in busy and " before, " in busy
    assert "exit status 3" in out and "skipped.py" not in out and "failed: broken.py" in err


def _python_with_jaxlib() -> str | None:
    for candidate in (sys.executable, "/work/main/.venv-samples-current/bin/python", "/tmp/venv-jax/bin/python"):
        if Path(candidate).exists() and subprocess.run(
                [candidate, "-c", "from jaxlib import _hlo; _hlo.hlo_module_from_text"],
                capture_output=True).returncode == 0:
            return candidate
    return None


def test_xla_parser_is_timed_on_the_same_file(tmp_path):
    python = _python_with_jaxlib()
    if python is None:
        pytest.skip("no Python with jaxlib here")
    path = tmp_path / "generated.hlo"
    path.write_text(parse_speed.generate(200_000, 1))
    figures = parse_speed.measure_xla(python, str(path), 1)
    assert figures["xla_mb_per_cpu_s"] > 0 and figures["xla_mb_per_s"] > 0 and figures["jaxlib"]
    path.write_text("HloModule m\nENTRY e {\n  ROOT x = f32[] nonsense(\n}\n")
    assert "XLA's parser failed" in parse_speed.measure_xla(python, str(path), 1)["error"]



def test_small_inputs_are_parsed_more_times_by_both_parsers():
    """The best of three 50 ms parses is as noisy as the machine's load: a 1 MB input is
    parsed about 10 MB's worth of times (by hlofuse and by XLA alike), large ones `--repeat`."""
    assert parse_speed.repeats(1.07, 3) == 10 and parse_speed.repeats(0.2, 3) == 12
    assert parse_speed.repeats(12.1, 3) == 3 and parse_speed.repeats(40.2, 5) == 5


def test_memory_probe_reports_what_a_process_pays_once(tmp_path):
    path = tmp_path / "generated.hlo"
    path.write_text(parse_speed.generate(100_000, 2))
    figures = parse_speed.measure_memory(str(path))
    assert figures["import_cpu_s"] > 0 and figures["first_use_cpu_s"] > 0
    assert figures["peak_rss_mb"] >= figures["rss_before_parse_mb"] > 0
