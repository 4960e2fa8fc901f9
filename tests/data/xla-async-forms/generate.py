"""Regenerate this folder: XLA's own parser reads `written.hlo` (every async form it accepts:
the `X-start` / `X-update` / `X-done` sugar of an async op wrapping X, the generic
async-start/-update/-done with `calls=`, and the opcodes that have start/done forms of their
own: all-gather, all-reduce, collective-permute, copy, send, recv) and its printer writes
`printed_by_xla.hlo`.  XLA prints the generic async-start around a single all-to-all as the
sugar `all-to-all-start`, and orders instructions its own way.  `errors.tsv` holds texts XLA
rejects, with XLA's message.

    .venv-samples-current/bin/python tests/data/xla-async-forms/generate.py   # jax 0.10.2
"""

import csv
from pathlib import Path

from jax._src.lib import xla_client

HERE = Path(__file__).resolve().parent

module = xla_client.hlo.hlo_module_from_text((HERE / "written.hlo").read_text())
(HERE / "printed_by_xla.hlo").write_text(module.to_string())

with open(HERE / "errors.tsv", newline="") as fh:
    for name, text, expected in csv.reader(fh, delimiter="\t"):
        try:
            xla_client.hlo.hlo_module_from_text(text.replace("\\n", "\n"))
        except Exception as err:  # noqa: BLE001 - XLA's parse error
            assert expected in str(err), (name, str(err))
        else:
            raise AssertionError(f"{name}: XLA accepted it")
print("ok")
