"""Print the conformance pass rate of each XLA pass after the run."""

from __future__ import annotations


def pytest_terminal_summary(terminalreporter):
    from collections import defaultdict

    from .test_conformance import RESULTS

    if not RESULTS:
        return
    by_pass = defaultdict(list)
    for result in RESULTS.values():
        by_pass[result.case["pass"]].append(result.ok)
    terminalreporter.section("XLA fusion corpus conformance (non-manual cases)")
    for name in sorted(by_pass):
        ok = by_pass[name]
        terminalreporter.write_line(f"{name:28} {sum(ok):4d} / {len(ok):<4d} {sum(ok) / len(ok):7.1%}")
