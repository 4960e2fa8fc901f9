"""Conformance of hlofuse's fusion replays with XLA's own unit tests
(/work/shared/corpus/fusion/MANIFEST.jsonl): an expectation matcher, a runner with one entry
per XLA pass, and the tracked list of cases that still fail (known_failures.tsv)."""
