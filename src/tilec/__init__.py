"""tilec: a compiler from .tile kernels to readable CUDA C++."""

__version__ = "0.1.0"
