"""Inputs that are not HLO text at all (hlofuse/parse/sniff.py): an empty file, binary data.
Each gets one line that says what it is; no error sends raw bytes of its input to the
terminal (terminal.printable)."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import zipfile

import pytest

import hlofuse
from hlofuse import HloSyntaxError
from hlofuse.terminal import printable

from conftest import CHILD_PYTHONPATH, REPO

HLO = "HloModule m\n\nENTRY main {\n  ROOT p = f32[4] parameter(0)\n}\n"


def _cli(args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hlofuse", *args], input=stdin, capture_output=True, cwd=REPO,
                          env={"PYTHONPATH": CHILD_PYTHONPATH, "PATH": "/usr/bin:/bin",
                               "HLOFUSE_CACHE": os.environ["HLOFUSE_CACHE"]}, timeout=120)


def _one_error_line(run: subprocess.CompletedProcess) -> str:
    err = run.stderr.decode("utf-8")
    assert run.returncode == 3, err
    assert all(ch.isprintable() or ch == "\n" for ch in err), repr(err)  # nothing raw reaches the terminal
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("data, message", [
    (b"", "error: the file is empty (expected an HLO module)"),
    (b"  \n\n\t\r\n", "error: the file holds only whitespace (expected an HLO module)"),
    (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4, "not HLO text: this looks like an ELF executable"),
    (gzip.compress(HLO.encode()), "this looks like gzip-compressed data; decompress it first (gunzip -k FILE)"),
    (b"BZh91AY&SY" + bytes(range(200)), "bzip2-compressed data"),
    (b"\x08\x01\x12\x04main\x1a\x00\x22\x10" + bytes(range(1, 200)), "this looks like binary data (a NUL byte at offset 9)"),
    (bytes(range(128, 256)) * 8, "this looks like binary data (1024 control characters or bytes that are not UTF-8"),
], ids=["empty", "whitespace", "elf", "gzip", "bzip2", "protobuf", "not-utf8"])
def test_a_file_that_is_not_hlo_text(tmp_path, data, message):
    path = tmp_path / "input.hlo"
    path.write_bytes(data)
    line = _one_error_line(_cli(["parse", str(path)]))
    assert line.startswith(f"{path}: error: ") and message in line, line


def test_a_zip_archive(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("module.txt", HLO)
    path = tmp_path / "dump.zip"
    path.write_bytes(buffer.getvalue())
    assert "this looks like a zip archive; extract the HLO text file first" in _one_error_line(_cli(["explain", str(path)]))


def test_stdin_empty_and_binary():
    assert _one_error_line(_cli(["parse", "-"], b"")) == "<stdin>: error: the input is empty (expected an HLO module)"
    assert "an ELF executable" in _one_error_line(_cli(["print", "-"], b"\x7fELF\x02\x01\x01\x00" + bytes(64)))


def test_the_api_says_the_same():
    with pytest.raises(HloSyntaxError, match="the input is empty"):
        hlofuse.loads("")
    with pytest.raises(HloSyntaxError, match=r"^m\.hlo: error: not HLO text: this looks like binary data \(a NUL"):
        hlofuse.loads(HLO.replace("ROOT", "ROOT\x00"), path="m.hlo")
    with pytest.raises(HloSyntaxError, match="^f.hlo: error: the file is empty"):
        hlofuse.loads("", path="f.hlo")


def test_a_stray_byte_that_is_not_utf8_is_still_text(tmp_path):
    # XLA's lexer reads bytes: one Latin-1 character in an op_name does not make a file binary
    path = tmp_path / "latin1.hlo"
    path.write_bytes(HLO.replace("parameter(0)", 'parameter(0), metadata={op_name="caf\xe9"}').encode("latin-1"))
    module = hlofuse.load(path)
    assert module.entry.root.attr("metadata") == '{op_name="caf\ufffd"}'


def test_control_characters_are_escaped_in_the_error_and_its_context(tmp_path):
    # an escape sequence in a long file: too few to call it binary, never echoed raw
    text = HLO.replace("parameter(0)", 'parameter(0), metadata={op_name="\x1b[31m\x07"} ,, x') + "// x\n" * 2000
    path = tmp_path / "esc.hlo"
    path.write_text(text)
    run = _cli(["parse", str(path)])
    err = run.stderr.decode()
    assert run.returncode == 3 and "\x1b" not in err and "\x07" not in err, err
    line, caret = err.splitlines()[1:3]
    assert line.endswith('op_name="\\x1b[31m\\x07"} ,, x')
    assert line[caret.index("^"):] == ",, x", (line, caret)  # the caret still points at the error


def test_printable():
    assert printable("plain é ü") == "plain é ü"
    # a tab is harmless and kept; controls, DEL and invisible formatting characters are shown
    assert printable("a\x00b\tc\x7f\u200b\u202e") == "a\\x00b\tc\\x7f\\u200b\\u202e"
