"""XLA's fusion passes, replayed on hlofuse.graph.Program.  pipelines.py lists the pipelines
they make up, in XLA's order; traversal order lives in each pass, policy (what may fuse) in
hlofuse/rules/."""
