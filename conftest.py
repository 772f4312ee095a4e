"""pytest's settings for the whole repository."""

import importlib.util

# The Triton kernel's source imports triton, a test dependency on Linux x86_64 only (the
# fast path does without it elsewhere); where it is missing, collecting the file's doctests
# would stop the whole run.
collect_ignore = [] if importlib.util.find_spec("triton") else ["posenc/fast/triton_kernel.py"]
