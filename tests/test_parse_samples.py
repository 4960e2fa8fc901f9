"""Every HLO text file of sample_dumps/ (real XLA dumps, found with dumpdir.scan) parses and
prints back character for character.  The folder may be empty while it is being regenerated;
then the test skips."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import hlofuse
from hlofuse.dumpdir import scan

from conftest import read_text


def _hlo_files(root: Path) -> list[Path]:
    found, seen = [], set()
    for folder, dirs, _ in os.walk(root):  # does not follow the folders' symlinks: no duplicates
        dirs.sort()
        for f in scan(folder):
            real = f.path.resolve()
            if f.stage != "priority_fusion_dump" and real not in seen:
                seen.add(real)
                found.append(f.path)
    return found


def test_sample_dumps_parse_and_print_back(sample_dumps_dir):
    files = _hlo_files(sample_dumps_dir) if sample_dumps_dir.is_dir() else []
    if not files:
        pytest.skip("sample_dumps/ has no HLO dumps right now (being regenerated?)")
    failures, instructions = [], 0
    for path in files:
        text = read_text(path)
        try:
            module = hlofuse.loads(text, path=str(path))
        except hlofuse.HloSyntaxError as err:
            failures.append(err.one_line())
            continue
        instructions += module.instruction_count
        if hlofuse.dumps(module) != text:
            failures.append(f"{path}: does not print back exactly")
    print(f"\nsample dumps: {len(files) - len(failures)} of {len(files)} files parse and print back "
          f"({instructions} instructions)")
    assert not failures, f"{len(failures)} of {len(files)} sample dumps fail:\n" + "\n".join(failures[:20])
