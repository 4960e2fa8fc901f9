"""Renderers and the `explain` / `render` commands: the JSON schema is stable, the CSV reads
back with pandas, the HTML report is self-contained, the SVG has kernel clusters and labelled
boundary edges, and a missing Graphviz gives one line and the DOT source."""

from __future__ import annotations

import io
import json
import re
import shutil

import pytest
from click.testing import CliRunner

from hlofuse.cli import main
from hlofuse.explain import dump_context, explain
from hlofuse.parse import parse_text
from hlofuse.render import dot as dotmod
from hlofuse.render.csv import COLUMNS, boundaries_frame
from hlofuse.render.json import SCHEMA, explanation_dict

from conftest import REPO

DEMO = REPO / "sample_dumps" / "gpu-legacy-rtx2080ti" / "cartpole_b_concat_vecdone"
RNG = REPO / "sample_dumps" / "gpu-current-h100" / "cartpole_a_rng_customcall"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed (make graphviz)")


def _explain(folder):
    from hlofuse.triage import TriageOptions, triage

    dump = dump_context(str(folder))
    module = parse_text(dump.chosen.path.read_text(encoding="utf-8"), str(dump.chosen.path))
    return triage(explain(module, dump=dump), TriageOptions(predict=True))


@pytest.fixture(scope="module")
def demo():
    return _explain(DEMO)


# ------------------------------------------------------------------------------------------
# JSON and CSV
# ------------------------------------------------------------------------------------------

TOP = {"schema", "module", "backend", "pipeline", "gpu", "input", "stage", "detected", "xla_log", "kernels",
       "boundaries", "summary", "notes", "replayed_from", "groups"}
BOUNDARY = {"producer", "consumer", "producer_kernel", "output", "consumer_kernel", "producer_computation",
            "consumer_computation", "crossing", "rule", "tags", "reason", "relaxable", "bytes", "source",
            "consumer_source", "hint", "xla_reason", "agrees_with_xla", "explained_by", "via", "facts",
            "decided_in", "rule_xla_reason", "then", "hint_kind", "modelled_us", "cost"}
KERNEL = {"name", "kind", "label", "computation", "role", "instructions", "root", "library", "bytes_out", "source",
          "modelled_us", "launches", "modelled_us_per_run", "priced_by"}
SUMMARY = {"kernels", "kernels_launched", "kernels_per_computation", "loops", "boundaries", "boundaries_by_rule",
           "unknown", "bytes_across_boundaries", "bytes_across_boundaries_per_run", "disagreements_with_xla",
           "agreements_with_xla", "decided_in", "modelled"}
SOURCE = {"file", "line", "op_name", "function"}
LOOP = {"while", "computation", "body", "condition", "trip_count", "trip_count_from", "body_kernels",
        "condition_kernels", "condition_launched", "kernels_per_iteration", "kernels_total",
        "modelled_us_per_iteration", "modelled_us_per_run"}
GROUP = {"rule", "source", "count", "bytes", "bytes_per_run", "modelled_us", "share", "relaxable", "tags", "hint",
         "hint_kind", "hint_fix", "fix", "boundaries"}
CHANGE = {"basis", "kernels_delta", "launches_delta", "modelled_us_delta", "worse", "speedup", "upper_bound", "error"}
MODELLED = {"target", "modelled_us_per_run", "launches_per_run", "kernels", "unknown_runs", "boundaries_us_per_run",
            "groups", "predictions"}


def test_json_schema_is_stable(demo):
    d = json.loads(json.dumps(explanation_dict(demo)))
    assert d["schema"] == SCHEMA == "hlofuse.explain/1"
    assert set(d) == TOP
    assert d["boundaries"] and all(set(b) == BOUNDARY for b in d["boundaries"])
    assert all(set(k) == KERNEL for k in d["kernels"])
    assert set(d["summary"]) == SUMMARY
    assert all(set(lp) == LOOP for lp in d["summary"]["loops"])
    for b in d["boundaries"]:
        assert set(b["source"]) == SOURCE
        assert isinstance(b["bytes"], int) and isinstance(b["tags"], list) and isinstance(b["crossing"], list)
        assert b["relaxable"] in (True, False, None)
    assert sum(d["summary"]["boundaries_by_rule"].values()) == len(d["boundaries"])
    assert set(d["summary"]["modelled"]) == MODELLED
    assert d["groups"] and all(set(g) == GROUP for g in d["groups"])
    changes = [g[key] for g in d["groups"] for key in ("fix", "hint_fix") if g[key] is not None]
    assert changes and all(set(c) == CHANGE for c in changes)
    assert all(isinstance(b["modelled_us"], float) and set(b["cost"]) == {"write_us", "read_us", "launch_us"}
               for b in d["boundaries"])


def test_explain_json_on_the_command_line():
    result = CliRunner().invoke(main, ["explain", str(DEMO), "--json"])
    assert result.exit_code == 0, result.output
    d = json.loads(result.stdout)
    assert d["module"] == "jit_cartpole_b_concat_vecdone" and d["backend"] == "gpu" and d["pipeline"] == "legacy"
    assert d["summary"]["loops"][0]["trip_count"] == 100


def test_csv_reads_back_with_pandas(demo, tmp_path):
    import pandas as pd

    out = tmp_path / "b.csv"
    result = CliRunner().invoke(main, ["explain", str(DEMO), "--csv", str(out)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert list(frame.columns) == list(COLUMNS)
    assert len(frame) == len(demo.boundaries)
    assert frame["source_line"].notna().all() and (frame["source_line"] > 0).all()
    assert set(frame["rule"]) == {b.rule for b in demo.boundaries}
    assert boundaries_frame(demo)["bytes"].sum() == demo.summary()["bytes_across_boundaries"]


def test_human_output_names_rules_sources_and_hints():
    result = CliRunner().invoke(main, ["explain", str(RNG)])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "BND-LIBRARY-PRODUCER" in text and "BND-TUPLE-CONSUMER" in text
    assert "programs.py:" in text
    assert "precompute the random numbers" in text
    assert "\x1b[" not in text  # colour only on a terminal


# ------------------------------------------------------------------------------------------
# DOT and SVG
# ------------------------------------------------------------------------------------------


def test_dot_has_a_cluster_per_kernel_and_labelled_boundaries(demo):
    source = dotmod.to_dot(demo.fused_module, demo)
    assert source.startswith("digraph")
    clusters = re.findall(r"subgraph cluster_\d+", source)
    assert len(clusters) >= len(demo.kernels) + len(demo.computations)
    labels = set(re.findall(r'label="((?:BND|FM|IF|GF|MOF|PF|CPU)[-A-Z0-9]+)(?: ×\d+)?"', source))
    rules = {b.rule for b in demo.boundaries if b.rule != "unknown"}
    assert labels == rules
    assert "programs.py:" in source  # tooltips carry the source line


def test_collapse_focus_and_computation(demo):
    module = demo.fused_module
    full = dotmod.to_dot(module, demo)
    collapsed = dotmod.to_dot(module, demo, dotmod.DrawOptions(threshold=10))
    assert "kernels collapsed" in collapsed and collapsed.count("->") < full.count("->")
    assert all(f'"{k.name}' in collapsed for k in demo.kernels)
    body = demo.loops[0].body
    only_body = dotmod.to_dot(module, demo, dotmod.DrawOptions(computation=body))
    assert body in only_body and demo.fused_module.entry_name not in only_body
    focus = next(b.producer for b in demo.boundaries if b.producer.startswith("concatenate"))
    near = dotmod.to_dot(module, demo, dotmod.DrawOptions(focus=focus, radius=1))
    assert focus in near and near.count(" [label=") < full.count(" [label=")
    from hlofuse.errors import InputError

    with pytest.raises(InputError):
        dotmod.to_dot(module, demo, dotmod.DrawOptions(focus="no-such-instruction"))
    with pytest.raises(InputError):
        dotmod.to_dot(module, demo, dotmod.DrawOptions(computation="no-such-computation"))


@needs_dot
def test_render_writes_svg_with_clusters_and_labelled_edges(demo, tmp_path):
    out = tmp_path / "demo.svg"
    result = CliRunner().invoke(main, ["render", str(DEMO), "-o", str(out)])
    assert result.exit_code == 0, result.output
    svg = out.read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert svg.count('class="cluster"') >= len(demo.kernels)
    assert ">BND&#45;TUPLE&#45;CONSUMER<" in svg  # Graphviz escapes "-" in text
    assert "xlink:title" in svg and "programs.py" in svg  # tooltips with the reason and the line


@needs_dot
def test_render_before_fusion_draws_the_unfused_graph(tmp_path):
    out = tmp_path / "before.svg"
    result = CliRunner().invoke(main, ["render", str(DEMO), "-o", str(out), "--stage", "before"])
    assert result.exit_code == 0, result.output
    svg = out.read_text()
    assert "before fusion" in svg and "BND-" not in svg


def test_render_without_graphviz_says_how_to_install_and_writes_dot(tmp_path, monkeypatch):
    from hlofuse.render import svg as svgmod

    monkeypatch.setattr(svgmod, "dot_program", lambda: None)
    out = tmp_path / "demo.svg"
    result = CliRunner().invoke(main, ["render", str(DEMO), "-o", str(out)])
    assert result.exit_code == 5
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "install Graphviz" in lines[0] and "apt-get install graphviz" in lines[0]
    assert not out.exists()
    assert (tmp_path / "demo.dot").read_text().startswith("digraph")


def test_render_dot_flag_writes_the_source(tmp_path):
    out = tmp_path / "g.dot"
    result = CliRunner().invoke(main, ["render", str(DEMO), "-o", str(out), "--dot", "--computation",
                                       "region_0.103"])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("digraph")


# ------------------------------------------------------------------------------------------
# HTML
# ------------------------------------------------------------------------------------------


def test_html_report_is_self_contained(demo, tmp_path):
    out = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["explain", str(DEMO), "--html", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert "<script" not in html.lower() and "<link" not in html.lower()
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', html), "no external resources"
    assert "<style>" in html
    rows = re.findall(r"<tr><td class=\"num\">\d+</td><td><code>", html)  # boundary rows name producers
    assert len(rows) == len(demo.boundaries)
    groups = re.findall(r"<tr><td class=\"num\">\d+</td><td class=\"num\">", html)
    assert len(groups) == len(demo.groups) and "Modelled:" in html
    if shutil.which("dot"):
        assert "<svg" in html and 'class="cluster"' in html and "<?xml" not in html
    else:
        assert "install Graphviz" in html and "DOT source" in html


def test_html_report_without_graphviz_keeps_the_dot_source(demo, monkeypatch):
    from hlofuse.commands.explain import html_report
    from hlofuse.render import svg as svgmod

    monkeypatch.setattr(svgmod, "dot_program", lambda: None)
    html = html_report(demo)
    assert "<svg" not in html and "digraph" in html and "install Graphviz" in html


def test_written_files_are_readable_by_others(tmp_path):
    import os
    import stat

    out = tmp_path / "b.csv"
    old = os.umask(0o022)
    try:
        CliRunner().invoke(main, ["explain", str(DEMO), "--csv", str(out)])
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_rich_table_renders_to_a_plain_console(demo):
    from rich.console import Console

    from hlofuse.render.table import print_explanation

    buffer = io.StringIO()
    print_explanation(demo, Console(file=buffer, width=160, force_terminal=False), limit=3, full=True)
    text = buffer.getvalue()
    assert "first 3" in text and "While loops" in text and "Boundaries by rule" in text


def test_fuse_json_lists_one_kernel_or_decision_per_line_and_parses_back():
    """`fuse --json` writes each element of its long lists on a line of its own (C-speed
    encoding, greppable); the document is the same JSON as the result's to_dict."""
    from hlofuse.render.json import dumps_listing

    payload = {"module": "m", "empty": [], "nested": {"a": [1, 2]}, "rows": [{"x": 1, "y": [None, "é"]}, {"x": 2}]}
    text = dumps_listing(payload)
    assert json.loads(text) == payload
    assert '    {"x": 1, "y": [null, "\\u00e9"]},' in text.splitlines()
    folder = REPO / "sample_dumps" / "gpu-legacy-rtx2080ti" / "cartpole_b_concat"
    out = CliRunner().invoke(main, ["fuse", str(folder), "--json"]).stdout
    document = json.loads(out)
    lines = out.splitlines()
    assert sum(1 for line in lines if line.startswith('    {"pass": ')) == len(document["decisions"]) > 10
    assert document["kernels"] and all(set(k) == {"name", "kind", "computation", "instructions", "root"}
                                       for k in document["kernels"])
