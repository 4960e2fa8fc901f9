"""Running HLO: the NumPy reference evaluator (interp), kernel generation shared by two
targets (emit → cpu / cuda), and the lowering of a module to kernels and host steps (lower).

Nothing here is imported by the rest of hlofuse at import time; `hlofuse bench` (bench.py)
is the user-facing entry point.
"""
