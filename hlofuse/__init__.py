"""hlofuse: make XLA operator fusion visible and testable."""
