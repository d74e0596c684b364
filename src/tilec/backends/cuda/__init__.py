"""The CUDA backend: spellings and helpers (spelling.py), sm_80-family lowerings (sm80.py)."""
