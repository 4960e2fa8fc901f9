"""What `hlofuse rules` prints, without importing the rules.

The rules register themselves when their modules are imported, and those modules import the
cost model, the graph and the GPU tables: a third of a second before the first line of a
command that only documents them.  The catalogue is every rule's documentation (Rule.to_dict)
kept as JSON in the private cache folder (hlofuse/private_files.py: ours alone, sealed),
keyed by `code_digest()`: any change to hlofuse's code makes a new one.  JSON, not pickle:
the catalogue is plain data.  A catalogue that is missing, does not verify, or cannot be read
is built again from the registry.
"""

from __future__ import annotations

import json
from typing import Iterable, Mapping

from . import private_files
from .rules import Rule, XlaRef

FOLDER = "rules"


def catalogue() -> Mapping[str, Rule]:
    """Every rule by id, as documentation: `check` is None (use hlofuse.rules.load_all to
    evaluate rules)."""
    from . import result_cache

    folder = private_files.cache_folder(FOLDER) if result_cache.enabled() else None
    name = _entry_name()
    if folder is not None:
        data = private_files.read(folder, name)
        if data is not None:
            try:
                return _from_dicts(json.loads(data))
            except (ValueError, TypeError, KeyError):
                private_files.discard(folder, name)
    from .rules import load_all

    rules = load_all()
    if folder is not None:
        try:
            private_files.store(folder, name, json.dumps([r.to_dict() for r in rules.values()]).encode())
        except OSError:
            pass
    return rules


def find(refs: Iterable[str], rules: Mapping[str, Rule]) -> list[Rule]:
    """hlofuse.rules.find over `rules` (a catalogue): exact id > name > tag > glob; an unknown
    reference is an error naming close matches."""
    from .errors import UnknownRuleRef
    from .rules import _match, _unknown_message

    out: list[Rule] = []
    for ref in refs:
        matched = _match(ref, rules)
        if not matched:
            raise UnknownRuleRef(_unknown_message(ref, rules))
        out.extend(r for r in matched if r not in out)
    return out


def _entry_name() -> str:
    from .code_digest import code_digest

    return f"catalogue-{code_digest()[:40]}.json"


def _from_dicts(items: list[dict]) -> dict[str, Rule]:
    rules = {}
    for d in items:
        source = d["source"]
        rules[d["id"]] = Rule(
            id=d["id"], name=d["name"], summary=d["summary"], doc=d["doc"], passes=tuple(d["passes"]),
            pipelines=tuple(d["pipelines"]), tags=frozenset(d["tags"]), relaxable=bool(d["relaxable"]),
            xla=XlaRef(**d["xla"]), message=d["message"], check=None, status=d["status"],
            source=(source["file"], int(source["line"])))
    return rules
