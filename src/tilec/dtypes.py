"""Element types of the .tile language and their C++ spellings."""

from __future__ import annotations

import builtins
import enum


class DType(enum.Enum):
    float16 = ("float16", "half", 16, "float")
    bfloat16 = ("bfloat16", "__nv_bfloat16", 16, "float")
    float32 = ("float32", "float", 32, "float")
    float64 = ("float64", "double", 64, "float")
    float8_e4m3 = ("float8_e4m3", "__nv_fp8_e4m3", 8, "float")
    float8_e5m2 = ("float8_e5m2", "__nv_fp8_e5m2", 8, "float")
    # AMD CDNA3's fp8 formats (gfx942's matrix cores): no infinities, no negative zero, 0x80 is NaN,
    # exponent biases 8 and 16 (torch.float8_e4m3fnuz, torch.float8_e5m2fnuz); no CUDA type
    float8_e4m3fnuz = ("float8_e4m3fnuz", "tilec_fp8_e4m3fnuz", 8, "float")
    float8_e5m2fnuz = ("float8_e5m2fnuz", "tilec_fp8_e5m2fnuz", 8, "float")
    int8 = ("int8", "signed char", 8, "int")
    int16 = ("int16", "short", 16, "int")
    int32 = ("int32", "int", 32, "int")
    int64 = ("int64", "long long", 64, "int")
    uint8 = ("uint8", "unsigned char", 8, "uint")
    uint16 = ("uint16", "unsigned short", 16, "uint")
    uint32 = ("uint32", "unsigned int", 32, "uint")
    uint64 = ("uint64", "unsigned long long", 64, "uint")
    bool = ("bool", "bool", 8, "bool")
    # Sub-byte types: two elements to a byte, the even element in the low nibble (TileLang's and
    # torch's packing). Only tensors and shared tiles hold them; an element reads as its value
    # type (`value_type`), and the pass pack_subbyte turns the buffers into byte buffers of the
    # `storage` type below, half as wide.
    int4 = ("int4", "unsigned char", 4, "int")  # cname: the bytes of a tensor argument
    uint4 = ("uint4", "unsigned char", 4, "uint")
    float4_e2m1 = ("float4_e2m1", "unsigned char", 4, "float")  # fp4 (MXFP4's element): +-{0, .5, 1, 1.5, 2, 3, 4, 6}
    # The bytes of the packed pairs (not written in .tile source): uint8 to every pass but
    # instruction selection, which reads int4x2 operands as 4-bit ones (backends/cuda/instructions.py).
    int4x2 = ("int4x2", "unsigned char", 8, "uint")
    uint4x2 = ("uint4x2", "unsigned char", 8, "uint")
    float4_e2m1x2 = ("float4_e2m1x2", "unsigned char", 8, "uint")

    def __init__(self, tile_name: str, cname: str, bits: int, kind: str):
        self.tile_name = tile_name
        self.cname = cname
        self.bits = bits
        self.kind = kind

    @property
    def bytes(self) -> int:
        assert self.bits >= 8, f"{self.tile_name} is a sub-byte type: count its bytes with `storage`"
        return self.bits // 8

    @property
    def is_subbyte(self) -> builtins.bool:
        """int4, uint4, float4_e2m1: two elements to a byte."""
        return self.bits < 8

    @property
    def is_packed(self) -> builtins.bool:
        """The byte types of packed pairs (int4x2, ...), which pack_subbyte gives sub-byte buffers."""
        return self in PACKED_OF.values()

    @property
    def storage(self) -> DType:
        """The byte type holding two elements of a sub-byte type."""
        return PACKED_OF[self]

    @property
    def value_type(self) -> DType:
        """What an element of a sub-byte buffer reads as: int8, uint8, float32 (exact)."""
        return VALUE_OF[self]

    @property
    def is_float(self) -> builtins.bool:  # builtins.: `bool` names the member DType.bool here
        return self.kind == "float"

    @property
    def is_fp8(self) -> builtins.bool:
        return self.is_float and self.bits == 8

    @property
    def is_int(self) -> builtins.bool:
        return self.kind in ("int", "uint")

    @property
    def int_bounds(self) -> tuple[int, int]:
        """The smallest and largest value of an integer type (0 and 2^bits - 1 unsigned)."""
        assert self.is_int, f"{self.tile_name} is not an integer type"
        if self.kind == "uint":
            return 0, 2**self.bits - 1
        return -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1

    @property
    def is_low_precision(self) -> builtins.bool:
        """Types CUDA computes in float32 (f16, bf16, fp8)."""
        return self.is_float and self.bits < 32

    def __repr__(self) -> str:
        return self.tile_name

    # Members are singletons compared by identity: hash them so too, in C (Enum's own hash is a
    # Python method, and every IR node's hash goes through its dtype).
    __hash__ = object.__hash__


PACKED_OF: dict[DType, DType] = {
    DType.int4: DType.int4x2,
    DType.uint4: DType.uint4x2,
    DType.float4_e2m1: DType.float4_e2m1x2,
}
VALUE_OF: dict[DType, DType] = {DType.int4: DType.int8, DType.uint4: DType.uint8, DType.float4_e2m1: DType.float32}
UNPACKED_OF: dict[DType, DType] = {v: k for k, v in PACKED_OF.items()}

# every dtype a .tile file may name (not the packed byte types)
DTYPES: dict[str, DType] = {d.tile_name: d for d in DType if d not in UNPACKED_OF}
DTYPE_ALIASES: dict[str, DType] = {
    "float8_e4m3fn": DType.float8_e4m3,  # TileLang's and torch's spelling
    "float4_e2m1fn": DType.float4_e2m1,  # TileLang's (and ml_dtypes') spelling
}
DTYPE_NAMES: dict[str, DType] = {**DTYPES, **DTYPE_ALIASES}  # every name a dtype may be written as


def promote(a: DType, b: DType) -> DType:
    """Result type of a binary arithmetic operation (float wins, then the wider)."""
    if a == b:
        return a
    if a.is_float != b.is_float:
        return a if a.is_float else b
    if a == DType.bool:
        return b
    if b == DType.bool:
        return a
    return a if a.bits >= b.bits else b
