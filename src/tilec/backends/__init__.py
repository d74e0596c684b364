"""Backends: one package per language (cuda/, later hip/), one module per target family.

A backend module holds what only that target knows: the spellings of its
built-ins, barriers and launch (the target record), the inline helpers it
emits, and its lowerings of the tile ops that map to its own instructions
(the gemm, global->shared copies). Everything else is shared.
"""
