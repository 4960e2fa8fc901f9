"""XLA's fusion passes, replayed on hlofuse.graph.Program.  Each module here registers the
pipelines it implements with hlofuse.pipeline.register_pipeline; traversal order lives in the
pass, policy (what may fuse) in hlofuse/rules/."""
