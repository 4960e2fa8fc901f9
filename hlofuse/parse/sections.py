"""The source-location tables current JAX dumps print after the module header (FileNames,
FunctionNames, FileLocations, StackFrames) → `ir.StackFrameIndex`."""

from __future__ import annotations

import json
import re

from .. import ir

_KV_INT_RE = re.compile(r"([a-z_]+)=(-?[0-9]+)")
# The entries as JAX prints them (fields in this order, one space apart): read with one match,
# the fields where `_KV_INT_RE` would find them; any other spelling is read field by field.
_INT = "(-?[0-9]+)"
_LOCATION_RE = re.compile(f"{{file_name_id={_INT} function_name_id={_INT} line={_INT} end_line=-?[0-9]+ "
                          f"column={_INT} end_column=-?[0-9]+}}")
_FRAME_RE = re.compile(f"{{file_location_id={_INT} parent_frame_id={_INT}}}")


def stack_frame_index(sections) -> ir.StackFrameIndex:
    """The header_section records (kind, [(entry text, line, column)]) → ir.StackFrameIndex."""
    if not sections:
        return ir.StackFrameIndex()
    file_names: dict[int, str] = {}
    function_names: dict[int, str] = {}
    locations: dict[int, tuple[int, int, int, int]] = {}
    frames: dict[int, tuple[int, int]] = {}
    lines: list[str] = []
    titles = {"FILE_NAMES": "FileNames", "FUNCTION_NAMES": "FunctionNames",
              "FILE_LOCATIONS": "FileLocations", "STACK_FRAMES": "StackFrames"}
    for kind, entries in sections:
        lines.append(titles[kind])
        for entry, line, col in entries:
            # the id and its value are apart by spaces or tabs (the grammar's [ \t]+)
            ident_text, _, rest = entry.replace("\t", " ", 1).partition(" ")
            ident = int(ident_text)
            rest = rest.strip()
            lines.append(f"{ident} {rest}")
            if kind in ("FILE_NAMES", "FUNCTION_NAMES"):
                try:
                    value = json.loads(rest)
                except ValueError:
                    value = rest[1:-1]
                (file_names if kind == "FILE_NAMES" else function_names)[ident] = value
            elif kind == "FILE_LOCATIONS" and (common := _LOCATION_RE.fullmatch(rest)) is not None:
                locations[ident] = (int(common[1]), int(common[2]), int(common[3]), int(common[4]))
            elif kind == "STACK_FRAMES" and (common := _FRAME_RE.fullmatch(rest)) is not None:
                frames[ident] = (int(common[1]), max(int(common[2]) - 1, 0))  # (see below)
            else:
                # (the values converted where used: a table holds hundreds of entries, read at
                # every parse)
                field = dict(_KV_INT_RE.findall(rest)).get
                if kind == "FILE_LOCATIONS":
                    locations[ident] = (int(field("file_name_id", 0)), int(field("function_name_id", 0)),
                                        int(field("line", 0)), int(field("column", 0)))
                else:
                    # XLA prints parent_frame_id one above the parent's id (a root frame prints
                    # 1): in a JAX 0.10.2 dump the frames of <module> -> main -> f print
                    # `5 {.. parent_frame_id=1}`, `6 {.. parent_frame_id=6}`, `7 {.. parent_frame_id=7}`
                    # (tests/test_stack_frames.py checks it on a real dump).  Store the real id.
                    printed = int(field("parent_frame_id", 0))
                    frames[ident] = (int(field("file_location_id", 0)), max(printed - 1, 0))
        lines.append("")
    return ir.StackFrameIndex(file_names, function_names, locations, frames, "\n".join(lines))

