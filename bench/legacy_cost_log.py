"""The legacy GPU cost model, number by number, against what real XLA computed.

jax 0.4.35's XLA writes no fusion log, but its cost model says what it computes when asked
(`TF_CPP_VMODULE`): the launch grid and run-time estimate of every instruction the fusion
merger and multi-output fusion price ("Runtime data for HLO"), for every producer priced
with a consumer the time to read it back unfused and the compute and input-access time of
recomputing it fused, and the IR sizes the merger's huge-IR check compares.  `--capture` compiles every legacy sample program with that XLA (deviceless, as
sample_dumps/generate.py does) and keeps those numbers in tests/data/xla-0.4.35-cost-log/;
the default mode replays the legacy pipeline from each program's snapshot before fusion and
compares hlofuse's numbers for the same instructions with XLA's.

    python bench/legacy_cost_log.py --capture --python .venv-samples-legacy/bin/python
    python bench/legacy_cost_log.py [--gpu rtx2080ti|h100] [--program NAME] [-v]

A record of XLA's is matched when hlofuse computed the same values for an instruction of the
same name (times to the quarter nanosecond absl::Duration keeps, as XLA printed them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_dumps"
LOGS = REPO / "tests" / "data" / "xla-0.4.35-cost-log"
GPUS = ("rtx2080ti", "h100")

# ------------------------------------------------------------------------------------------
# XLA's log: parsing
# ------------------------------------------------------------------------------------------

_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] \S+:\d+\] ?(.*)$")
_UNITS_NS = {"h": 3.6e12, "m": 6e10, "s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|us|ns|m|s)")


def duration_ns(text: str) -> float:
    """absl::FormatDuration's text ("2.619us", "1m2.5s", "0", "inf") in nanoseconds."""
    text = text.strip()
    if text in ("inf", "-inf"):
        return float(text)
    sign = -1.0 if text.startswith("-") else 1.0
    parts = _DURATION_PART.findall(text.lstrip("-"))
    # absl::Duration counts quarter nanoseconds: "65.472us" is 65472 ns, not 65471.99999999999.
    return sign * round(4 * sum(float(number) * _UNITS_NS[unit] for number, unit in parts)) / 4


def messages(log: str) -> list[str]:
    """XLA's log messages, continuation lines joined to the message they belong to."""
    out: list[str] = []
    for line in log.splitlines():
        m = _PREFIX.match(line)
        if m:
            out.append(m.group(1))
        elif out:
            out[-1] += "\n" + line
    return out


_DIMS = re.compile(r"blocks: \{(\d+), (\d+), (\d+)\}, threads/block: \{(\d+), (\d+), (\d+)\}")
_FIELD = re.compile(r"^\s*(\w+): (\S+)$", re.M)
_IR = {
    "emitted": re.compile(r"^(\S+) would be emitted by (\S+) x(\d+)$"),
    "splits": re.compile(r"^Basic block split counts: (\d+), (\d+) -> (\d+)$"),
    "sizes": re.compile(r"^IR sizes: (\d+), (\d+) -> (\d+)$"),
}


def parse(log: str) -> list[dict]:
    """XLA's cost-model messages as records: `instruction` (EstimateRunTimeForInstruction:
    launch grid and run time), `unfused_read` (EstimateUnfusedExecTime: a consumer reading the
    producer's output), `fused_consumer` (EstimateFusedExecTime: compute and input access time
    of the producer inside a consumer) and `ir_size` (ProducerConsumerMergedTooLarge)."""
    records: list[dict] = []
    producer: str | None = None
    pending: dict | None = None  # a per-consumer record waiting for its times
    ir: dict | None = None
    for msg in messages(log):
        head, _, value = msg.partition(": ")
        head = head.strip()
        if msg.startswith("Runtime data for HLO: "):
            name, _, rest = value.partition("\n")
            grid = _DIMS.search(rest)
            fields = dict(_FIELD.findall(rest))
            records.append({
                "kind": "instruction", "name": name.strip(),
                "blocks": int(grid.group(1)) * int(grid.group(2)) * int(grid.group(3)),
                "threads": int(grid.group(4)) * int(grid.group(5)) * int(grid.group(6)),
                "flops": int(fields["flops"]), "bytes_read": int(fields["bytes_read"]),
                "bytes_written": int(fields["bytes_written"]),
                **{k: duration_ns(fields[k]) for k in ("read_time", "write_time", "compute_time", "exec_time")},
            })
        elif head == "Producer":
            producer = value.split("\n")[0].strip()
        elif producer is not None and head == "Unfused consumer":
            pending = {"kind": "unfused_read", "producer": producer, "consumer": value.strip()}
        elif pending is not None and pending["kind"] == "unfused_read" and head == "Read time unfused":
            records.append({**pending, "read_time": duration_ns(value)})
            pending = None
        elif producer is not None and head == "Fused consumer":
            pending = {"kind": "fused_consumer", "producer": producer, "consumer": value.strip()}
        elif pending is not None and pending["kind"] == "fused_consumer" and head == "Compute time by consumer":
            pending["compute_time"] = duration_ns(value)
        elif pending is not None and "compute_time" in pending and head == "Input access time by consumer":
            records.append({**pending, "access_time": duration_ns(value)})
            pending = None
        elif (m := _IR["emitted"].match(msg)):
            ir = {"kind": "ir_size", "producer": m.group(1), "consumer": m.group(2),
                  "replication": int(m.group(3))}
        elif ir is not None and (m := _IR["splits"].match(msg)):
            ir["splits"] = int(m.group(3))
        elif ir is not None and (m := _IR["sizes"].match(msg)):
            ir["merged"] = int(m.group(3))
            records.append(ir)
            ir = None
    return records


# ------------------------------------------------------------------------------------------
# Capturing: real XLA (jax 0.4.35) in a child process
# ------------------------------------------------------------------------------------------

VMODULE = "gpu_performance_model=10,gpu_hlo_cost_analysis=5"


def capture(python: str, program: str, gpu: str) -> list[dict]:
    """Compile `program` for `gpu` with jax 0.4.35 (the interpreter `python`) and parse what
    its cost model logged."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE=VMODULE,
               JAX_PLATFORMS="cpu", PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory() as dump:
        cmd = [python, str(SAMPLES / "generate.py"), "--child", "--build", "gpu-legacy", "--program", program,
               "--dump-dir", dump, "--pass-re", "fusion", "--gpu", gpu]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"{program} on {gpu}: XLA failed:\n{res.stderr[-2000:]}")
    return parse(res.stderr)


def log_path(gpu: str, program: str) -> Path:
    return LOGS / gpu / f"{program}.jsonl"


def write_log(path: Path, records: list[dict]) -> None:
    """One record per line, each distinct record once (XLA recomputes the same numbers many
    times), in the order XLA first logged them; written atomically."""
    seen: set[str] = set()
    lines = []
    for r in records:
        line = json.dumps(r, sort_keys=True)
        if line not in seen:
            seen.add(line)
            lines.append(line)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------
# hlofuse's numbers for the same program
# ------------------------------------------------------------------------------------------


def program_entries(gpu: str, only: list[str] | None = None) -> list[dict]:
    manifest = json.loads((SAMPLES / "MANIFEST.json").read_text())
    out = [e for e in manifest["programs"]
           if e["build"] == "gpu-legacy" and e["gpu"] == gpu and (e.get("files") or {}).get("before_fusion")
           and (only is None or e["program"] in only)]
    return sorted(out, key=lambda e: e["program"])


def hlofuse_records(entry: dict) -> list[dict]:
    """hlofuse's numbers for a sample program (a MANIFEST entry)."""
    import hlofuse

    module = hlofuse.load(str(SAMPLES / entry["path"] / entry["files"]["before_fusion"]))
    return replay_records(module, str(REPO / entry["gpu_spec"]))


def replay_records(module, gpu: str) -> list[dict]:
    """Replay the legacy pipeline on `module` (XLA's snapshot before fusion) for `gpu` and
    collect the cost model's numbers as XLA's log shows them."""
    from hlofuse.cost import legacy
    from hlofuse.pipeline import Options, replay

    records: list[dict] = []
    model_cls = legacy.LegacyPerformanceModel
    names = ("_run_time", "unfused_read_time", "fused_consumer_times", "merged_too_large")
    originals = {name: getattr(model_cls, name) for name in names}

    def run_time(self, node):
        data = originals["_run_time"](self, node)
        records.append({"kind": "instruction", "name": node.name, "blocks": data.blocks,
                        "threads": data.threads, "flops": int(data.flops), "bytes_read": data.bytes_read,
                        "bytes_written": data.bytes_written, "read_time": data.read_time / 4,
                        "write_time": data.write_time / 4, "compute_time": data.compute_time / 4,
                        "exec_time": data.exec_time / 4})
        return data

    def unfused_read_time(self, producer_data, producer, consumer):
        ticks = originals["unfused_read_time"](self, producer_data, producer, consumer)
        records.append({"kind": "unfused_read", "producer": producer.name, "consumer": consumer.name,
                        "read_time": ticks / 4})
        return ticks

    def fused_consumer_times(self, producer_data, producer, consumer):
        compute, access = originals["fused_consumer_times"](self, producer_data, producer, consumer)
        records.append({"kind": "fused_consumer", "producer": producer.name, "consumer": consumer.name,
                        "compute_time": compute / 4, "access_time": access / 4})
        return compute, access

    def merged_too_large(self, producer, consumer):
        answer = originals["merged_too_large"](self, producer, consumer)
        _, merged, splits = answer
        replication = 1
        if consumer.opcode == "fusion":
            replication = int(self.analysis.fused_ir_size(consumer, consumer.operand_index(producer)))
        records.append({"kind": "ir_size", "producer": producer.name, "consumer": consumer.name,
                        "replication": replication, "splits": splits, "merged": merged})
        return answer

    hooks = {"_run_time": run_time, "unfused_read_time": unfused_read_time,
             "fused_consumer_times": fused_consumer_times, "merged_too_large": merged_too_large}
    for name in names:
        setattr(model_cls, name, hooks[name])
    try:
        replay(module, Options(backend="gpu", pipeline="legacy", gpu=gpu))
    finally:
        for name in names:
            setattr(model_cls, name, originals[name])
    return records


# ------------------------------------------------------------------------------------------
# Comparing
# ------------------------------------------------------------------------------------------


KINDS = ("instruction", "unfused_read", "fused_consumer", "ir_size")


def _key(record: dict) -> tuple:
    if record["kind"] == "instruction":
        return ("instruction", record["name"])
    return (record["kind"], record["producer"], record["consumer"])


def _values(record: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in record.items() if k not in ("kind", "name", "producer", "consumer")))


@dataclass
class Comparison:
    program: str
    gpu: str
    matched: dict = field(default_factory=lambda: defaultdict(int))
    total: dict = field(default_factory=lambda: defaultdict(int))
    #: XLA's records hlofuse computed differently: (XLA's record, hlofuse's for that key)
    differ: list = field(default_factory=list)
    #: XLA's records whose key hlofuse never computed
    unseen: list = field(default_factory=list)


def compare(xla: list[dict], ours: list[dict], program: str = "", gpu: str = "") -> Comparison:
    """Each of XLA's records matched by a record of ours with the same key and values."""
    mine: dict[tuple, set[tuple]] = defaultdict(set)
    examples: dict[tuple, dict] = {}
    for r in ours:
        mine[_key(r)].add(_values(r))
        examples.setdefault(_key(r), r)
    result = Comparison(program, gpu)
    for r in xla:
        key = _key(r)
        result.total[r["kind"]] += 1
        if _values(r) in mine.get(key, ()):
            result.matched[r["kind"]] += 1
        elif key in mine:
            result.differ.append((r, examples[key]))
        else:
            result.unseen.append(r)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capture", action="store_true", help="compile with real XLA and store its numbers")
    parser.add_argument("--python", default=str(REPO / ".venv-samples-legacy" / "bin" / "python"),
                        help="an interpreter with jax 0.4.35 and its CUDA plugin (for --capture)")
    parser.add_argument("--gpu", action="append", choices=GPUS, help="default: both")
    parser.add_argument("--program", action="append")
    parser.add_argument("-v", "--verbose", action="store_true", help="list the records that differ")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    failures = 0
    for gpu in args.gpu or GPUS:
        for entry in program_entries(gpu, args.program):
            path = log_path(gpu, entry["program"])
            if args.capture:
                records = capture(args.python, entry["program"], gpu)
                write_log(path, records)
                print(f"{gpu:10} {entry['program']:28} {len(records):6} records -> {path.relative_to(REPO)}")
                continue
            if not path.exists():
                print(f"{gpu:10} {entry['program']:28} no XLA log (run with --capture)")
                continue
            result = compare(read_log(path), hlofuse_records(entry), entry["program"], gpu)
            cells = "  ".join(f"{k} {result.matched[k]}/{result.total[k]}" for k in KINDS
                              if result.total[k])
            print(f"{gpu:10} {entry['program']:28} {cells}")
            failures += len(result.differ) + len(result.unseen)
            if args.verbose:
                for theirs, mine in result.differ:
                    print(f"    XLA     {json.dumps(theirs, sort_keys=True)}\n    hlofuse {json.dumps(mine, sort_keys=True)}")
                for theirs in result.unseen:
                    print(f"    XLA only {json.dumps(theirs, sort_keys=True)}")
    return 1 if failures and not args.capture else 0


if __name__ == "__main__":
    sys.exit(main())
