"""The global scope of a program: files, imports, params and -D overrides.

    import "common.tile"        the imported file's params and macros come into scope
    param block_M = 128         block_M -> IntImm(128), a weak constant
    -D block_M=64               ... overridden, checked against the param's type

A mixin of the elaborator (elaborate.py), which adds kernels and statements.
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass
from typing import Any

from tilec import fold, tir
from tilec import syntax as S
from tilec.builtins import BUILTIN_NAMES, did_you_mean
from tilec.diagnostics import CompileError, Diagnostic, Note, error
from tilec.dtypes import DTYPE_NAMES, DTYPES, DType
from tilec.expressions import ExprElaborator
from tilec.fold import Val
from tilec.parse import parse
from tilec.source import SourceFile, Span
from tilec.values import POISON, Abandon, DTypeVal, MacroVal, Poison, Scope, Value


@dataclass
class File:
    path: str
    module: S.Module
    scope: Scope  # params and macros, its own and imported


TYPE_KINDS = {"int": "int", "float": "float", "bool": "bool", "dtype": "dtype"}


def kind_of(v: Value) -> str:
    if isinstance(v, DTypeVal):
        return "dtype"
    assert isinstance(v, Val)
    return "bool" if v.dtype == DType.bool else ("float" if v.dtype.is_float else "int")


def define_text(v: Value) -> str:
    """A param's value as `-D` writes it: 128, 0.5, True, float16."""
    if isinstance(v, DTypeVal):
        return v.dtype.tile_name
    assert isinstance(v, Val)
    c = fold.const(v.expr)
    assert c is not None, "params are constants"
    return repr(c) if isinstance(c, (bool, float)) else str(int(c))


def parse_define(text: str) -> int | float | bool | DType | None:
    t = text.strip()
    if t in ("True", "true", "False", "false"):
        return t in ("True", "true")
    for base in (0, 10):
        try:
            return int(t, base)
        except ValueError:
            pass
    try:
        return float(t)
    except ValueError:
        pass
    return DTYPE_NAMES.get(t)


def not_utf8(path: str, data: bytes, e: UnicodeDecodeError, at: Span | None) -> Diagnostic:
    """The diagnostic for a file that is not UTF-8, at its first bad byte (the
    file is shown with U+FFFD for the bad bytes)."""
    source = SourceFile(path, data.decode("utf-8", errors="replace"))
    offset = len(data[: e.start].decode("utf-8"))  # characters before the bad byte
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        hint = "the file looks like UTF-16 (it starts with a byte-order mark): save it as UTF-8"
    else:
        hint = "tilec reads .tile files as UTF-8; convert this one (iconv -f latin1 -t utf-8 for Latin-1)"
    return Diagnostic(
        Span(source, offset, offset + 1),
        f"the file is not valid UTF-8: byte 0x{data[e.start]:02x} ({e.reason})",
        hint=hint,
        notes=(Note(at, "imported here"),) if at is not None else (),
    )


# ---------------------------------------------------------------- the elaborator


class Fatal(Exception):
    """A file could not be read or parsed: nothing after it is meaningful."""

    def __init__(self, diags: list[Diagnostic]):
        self.diags = diags


class ProgramScope(ExprElaborator):
    def __init__(self, defines: dict[str, str], arch: str):
        self.defines = defines
        self.arch = arch
        self.diags: list[Diagnostic] = []
        self.files: list[str] = []
        self.loaded: dict[str, File] = {}
        self.params: dict[str, S.ParamDef] = {}
        self.used_defines: set[str] = set()
        self.dim_names: set[str] = set()
        self.candidate_sets: list[tir.CandidateSet] = []

    def report(self, diags: list[Diagnostic], kx: Any = None) -> None:
        notes = tuple(Note(span, f"in macro '{name}' called here") for name, span in reversed(kx.macros)) if kx else ()
        for d in diags:
            self.diags.append(Diagnostic(d.span, d.message, d.hint, d.notes + notes, d.severity) if notes else d)

    # ------------------------------------------------------------ files, imports, params, macros

    def load(self, path: str, text: str | None, at: Span | None, stack: list[str]) -> File:
        key = os.path.realpath(path)  # one file reached through two paths (a symlink) is loaded once
        if key in self.loaded:
            return self.loaded[key]
        if text is None:
            text = self.read(path, at)
        self.files.append(path)
        try:
            module = parse(SourceFile(path, text))
        except CompileError as e:
            raise Fatal(e.diagnostics) from None
        env = File(path, module, Scope())
        self.loaded[key] = env
        for item in module.items:
            try:
                self.item(item, env, stack + [path])
            except CompileError as e:
                self.report(e.diagnostics)
            except Abandon:
                pass
        return env

    def read(self, path: str, at: Span | None) -> str:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise Fatal([Diagnostic(at, f"cannot find file '{path}'")]) from None
        except OSError as e:
            raise Fatal([Diagnostic(at, f"cannot read file '{path}': {e.strerror or e}")]) from None
        data = data.removeprefix(codecs.BOM_UTF8)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise Fatal([not_utf8(path, data, e, at)]) from None

    def item(self, item: S.Item, env: File, stack: list[str]) -> None:
        if isinstance(item, S.Import):
            self.import_(item, env, stack)
        elif isinstance(item, S.ParamDef):
            self.param(item, env)
        elif isinstance(item, S.MacroDef):
            self.define(env, item.name, item.name_span, MacroVal(item, env.scope))
            if len({p.id for p in item.params}) != len(item.params):
                raise error(item.span, f"macro '{item.name}' has two parameters with the same name")

    def define(self, env: File, name: str, span: Span, value: Value, origin: str | None = None) -> None:
        old = env.scope.names.get(name)
        if old is not None and old is not value:
            where = env.scope.where.get(name, env.path)
            raise error(
                span,
                f"'{name}' is already defined" + (f" (in {where})" if where != env.path else ""),
                hint="give it another name",
            )
        if name in BUILTIN_NAMES:
            raise error(span, f"'{name}' is a built-in name", hint="give it another name")
        env.scope.names[name] = value
        env.scope.where[name] = origin or env.path

    def import_(self, item: S.Import, env: File, stack: list[str]) -> None:
        path = os.path.normpath(os.path.join(os.path.dirname(env.path), item.path))
        keys = [os.path.realpath(p) for p in stack]
        if os.path.realpath(path) in keys:
            chain = stack[keys.index(os.path.realpath(path)) :] + [path]
            raise error(
                item.span,
                "import cycle: " + " -> ".join(chain),
                hint="move the shared params and macros into a file that both import",
            )
        if not os.path.exists(path) and os.path.realpath(path) not in self.loaded:
            raise error(item.span, f"cannot find imported file '{item.path}' (looked for {path})")
        child = self.load(path, None, item.span, stack)
        for name, value in child.scope.names.items():
            self.define(env, name, item.span, value, child.scope.where.get(name, path))

    def param(self, p: S.ParamDef, env: File) -> None:
        try:
            self.define(env, p.name, p.name_span, POISON)
            self.params.setdefault(p.name, p)
            value = self.param_value(p, env)
        except CompileError:
            env.scope.names[p.name] = POISON
            raise
        env.scope.names[p.name] = value

    def param_value(self, p: S.ParamDef, env: File) -> Value:
        default = self.ev(p.value, env.scope, None)
        if isinstance(default, Poison):
            raise Abandon()
        if not isinstance(default, DTypeVal) and not (
            isinstance(default, Val) and fold.const(default.expr) is not None
        ):
            raise error(
                p.value.span,
                f"the value of param '{p.name}' must be a compile-time constant (an int, float, bool or dtype)",
            )
        strong = None
        if p.type is None:
            kind = kind_of(default)
        else:
            kind, strong = self.param_type(p.type)
        if p.name in self.defines:
            self.used_defines.add(p.name)
            value = self.define_value(p, kind, strong)
        else:
            value = self.typed_param(default, kind, strong, p.value.span, p.name)
        if p.candidates is not None:
            texts = self.candidates(p, p.candidates, env, kind, strong)
            self.candidate_sets.append(tir.CandidateSet(p.name, define_text(value), texts, p.candidates.span))
        return value

    def candidates(self, p: S.ParamDef, c: S.Tuple, env: File, kind: str, strong: DType | None) -> tuple[str, ...]:
        """`in (64, 128, 256)`: each candidate a compile-time constant of the param's type,
        none twice -> their -D texts."""
        texts: list[str] = []
        for item in c.items:
            v = self.ev(item, env.scope, None)
            if isinstance(v, Poison):
                raise Abandon()
            if not isinstance(v, DTypeVal) and not (isinstance(v, Val) and fold.const(v.expr) is not None):
                raise error(item.span, f"a candidate of param '{p.name}' must be a compile-time constant")
            text = define_text(self.typed_param(v, kind, strong, item.span, p.name))
            if text in texts:
                raise error(item.span, f"candidate {text} of param '{p.name}' is given twice")
            texts.append(text)
        return tuple(texts)

    def param_type(self, t: S.Expr) -> tuple[str, DType | None]:
        if isinstance(t, S.Name) and t.id in TYPE_KINDS:
            return TYPE_KINDS[t.id], None
        if isinstance(t, S.Name) and t.id in DTYPES:
            d = DTYPES[t.id]
            return ("bool" if d == DType.bool else "float" if d.is_float else "int"), d
        name = t.id if isinstance(t, S.Name) else t.span.text
        hint = did_you_mean(name, list(TYPE_KINDS) + list(DTYPES)) or "use int, float, bool, dtype or a dtype name"
        raise error(t.span, f"unknown param type '{name}'", hint=hint)

    def typed_param(self, v: Value, kind: str, strong: DType | None, span: Span, name: str) -> Value:
        have = kind_of(v)
        if have != kind and not (kind == "float" and have == "int"):
            raise error(
                span, f"param '{name}' is declared {kind} but its value is {'a ' + have if have != 'int' else 'an int'}"
            )
        if isinstance(v, DTypeVal):
            return v
        assert isinstance(v, Val)  # kind_of admits nothing else
        if strong is not None:
            return Val(fold.cast(v, strong, span), False)
        if kind == "float" and have == "int":
            return Val(fold.cast(v, DType.float32, span), True)
        return v

    def define_value(self, p: S.ParamDef, kind: str, strong: DType | None) -> Value:
        text = self.defines[p.name]
        value = parse_define(text)
        note = (Note(p.name_span, f"param '{p.name}' is defined here"),)
        ok = {
            "int": isinstance(value, int) and not isinstance(value, bool),
            "float": isinstance(value, (int, float)) and not isinstance(value, bool),
            "bool": isinstance(value, bool),
            "dtype": isinstance(value, DType),
        }[kind]
        if not ok:
            words = {"int": "an int", "float": "a float", "bool": "True or False", "dtype": "a dtype name"}
            raise CompileError(
                [Diagnostic(None, f"-D {p.name}={text}: expected {words[kind]} for param '{p.name}'", notes=note)]
            )
        if isinstance(value, DType):
            return DTypeVal(value)
        span = p.value.span
        try:
            v = fold.literal(float(value) if kind == "float" else value, span)  # type: ignore[arg-type]  # int | float | bool (ok above)
        except CompileError as e:  # too large: the -D value is at fault, not the default
            (d,) = e.diagnostics
            raise CompileError([Diagnostic(None, f"-D {p.name}={text}: {d.message}", d.hint, note)]) from None
        return Val(fold.cast(v, strong, span), False) if strong is not None else v

    def check_defines(self) -> None:
        for name in self.defines:
            if name in self.used_defines or name in self.dim_names:
                continue
            names = sorted(self.params)
            hint = did_you_mean(name, names) or (
                f"the params are {', '.join(names)}" if names else "this file has no params"
            )
            self.diags.append(
                Diagnostic(None, f"-D {name}: no param or symbolic dimension is named '{name}'", hint=hint)
            )
