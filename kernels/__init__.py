"""Kernels, installed as ``dsbench.kernels``: registry, torch references, and (later) Triton and
CUDA/HIP implementations.

Nothing outside this package imports a kernel module directly: ask the registry
(:func:`dsbench.kernels.registry.get`).
"""
