"""Parse .tile text into a `syntax.Module`.

The grammar is `tilec/grammar/tile.lark` (the repository's `grammar/tile.lark`
links to it), loaded with `importlib.resources` so it is found from a checkout
and from a wheel alike. One LALR parser is built per process; Lark caches its
analysis in the temp directory (`cache=True`), which keeps `tilec check` fast.

    kernel k(A: Tensor((N,), float32)):   ->  Module((KernelDef("k", (KParam("A", Call(...)),), body),))

Syntax errors become Diagnostics written for people: "expected ':' after the
for header", "unexpected indent", "'(' is never closed" -- never Lark's token
names.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from collections.abc import Iterator

from lark import Lark, Token, Tree
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput
from lark.lark import PostLex

from tilec import syntax as S
from tilec.budget import MAX_BLOCK_NESTING, MAX_EXPR_NESTING
from tilec.diagnostics import CompileError, Diagnostic, error
from tilec.source import SourceFile, Span

# ---------------------------------------------------------------- the parser


class _IndentError(Exception):
    def __init__(self, token: Token):
        self.token = token


class TileIndenter(PostLex):
    """Lark's Indenter, with errors that carry their token and no asserts."""

    always_accept = ("_NL",)
    _open = frozenset({"LPAR", "LSQB"})
    _close = frozenset({"RPAR", "RSQB"})

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        levels = [0]
        parens = 0
        token = None
        for token in stream:
            if token.type == "_NL":
                if parens == 0:
                    yield token
                    yield from self._indent(token, levels)
                continue
            yield token
            if token.type in self._open:
                parens += 1
            elif token.type in self._close:
                parens = max(0, parens - 1)
        while len(levels) > 1:
            levels.pop()
            pos = (token.end_pos or 0) if token else 0
            yield _at("_DEDENT", "", pos)

    @staticmethod
    def _indent(token: Token, levels: list[int]) -> Iterator[Token]:
        indent_str = token.rsplit("\n", 1)[-1] if "\n" in token else ""
        indent = indent_str.count(" ") + indent_str.count("\t") * 8
        pos = token.end_pos
        if indent > levels[-1]:
            levels.append(indent)
            yield _at("_INDENT", indent_str, pos)
            return
        while indent < levels[-1]:
            levels.pop()
            yield _at("_DEDENT", indent_str, pos)
        if indent != levels[-1]:
            raise _IndentError(_at("_DEDENT", indent_str, pos))


def _at(kind: str, value: str, pos: int | None) -> Token:
    return Token(kind, value, start_pos=pos, end_pos=pos)


_PARSER: Lark | None = None


def grammar_text() -> str:
    return importlib.resources.files("tilec").joinpath("grammar/tile.lark").read_text(encoding="utf-8")


def _parser() -> Lark:
    global _PARSER
    if _PARSER is None:
        try:
            _PARSER = _build(cache=True)
        except OSError:  # no usable temp directory for the cache: build it every time
            _PARSER = _build(cache=False)
    return _PARSER


def _build(cache: bool) -> Lark:
    return Lark(
        grammar_text(),
        start="module",
        parser="lalr",
        lexer="basic",
        postlex=TileIndenter(),
        propagate_positions=True,
        maybe_placeholders=True,
        cache=cache,
    )


def parse(source: SourceFile) -> S.Module:
    """Parse one file; raise CompileError with one syntax-error diagnostic. The syntax tree is
    immutable, so a text parsed before (`tilec tune` elaborates one file once per candidate) is
    not parsed again."""
    return _parse(source.path, source.text)


@functools.lru_cache(maxsize=16)
def _parse(path: str, text: str) -> S.Module:
    source = SourceFile(path, text)
    text = text if text.endswith("\n") else text + "\n"
    try:
        tree = _parser().parse(text)
    except _IndentError as e:
        raise CompileError([_dedent_error(source, e.token)]) from None
    except UnexpectedInput as e:
        raise CompileError([_syntax_error(source, e)]) from None
    except LarkError as e:  # anything else Lark may raise on odd input
        raise CompileError([Diagnostic(_span(source, 0, 1), f"syntax error: {e}")]) from None
    _check_nesting(source, tree)
    return _Builder(source).module(tree)


# ---------------------------------------------------------------- nesting budget

# Lark trees -> syntax: these rules make one node per level; the chains make a
# BinOp per operator (left-associative: the first operand is deepest); blocks are
# statements with a body, and an elif is a block inside the `if` before it.
_EXPR_NODES = frozenset(
    {"ifexp", "not_op", "unary", "pow", "call", "subscript", "attr", "tuple", "name"}
    | {"int", "float", "string", "true", "false"}
)
_CHAINS = {
    **dict.fromkeys(("or_test", "and_test", "bor", "bxor", "band"), 1),
    **dict.fromkeys(("shift", "arith", "term", "comparison"), 2),
}  # rule -> step from one operand to the next among its children
_BLOCKS = frozenset({"macro_def", "kernel_def", "for_stmt", "while_stmt", "if_stmt", "with_stmt"})


def _check_nesting(source: SourceFile, tree: Tree) -> None:
    """A located error where an expression or block nests deeper than the budget
    (budget.py): the compiler's later stages recurse on these trees."""
    stack: list[tuple[Tree | Token, int, int]] = [(tree, 0, 0)]  # (node, depth of its parent expr, blocks)
    while stack:
        node, depth, blocks = stack.pop()
        if not isinstance(node, Tree):
            continue
        kids = node.children
        if node.data in _CHAINS:
            operands = kids[:: _CHAINS[node.data]]
            n = len(operands)
            _within(source, node, depth + n - 1, MAX_EXPR_NESTING, "expression")
            stack += [(k, depth + n - max(i, 1), blocks) for i, k in enumerate(operands)]
            continue
        if node.data in _EXPR_NODES:
            depth += 1
            _within(source, node, depth, MAX_EXPR_NESTING, "expression")
        if node.data in _BLOCKS:
            blocks += 1
            _within(source, node, blocks, MAX_BLOCK_NESTING, "block")
        if node.data == "if_stmt":  # each elif / else is nested in the clause before it
            for i, k in enumerate(kids[2:], start=1):
                if isinstance(k, Tree):
                    _within(source, k, blocks + i, MAX_BLOCK_NESTING, "block")
                    stack.append((k, depth, blocks + i))
            stack += [(k, depth, blocks) for k in kids[:2]]
            continue
        stack += [(k, depth, blocks) for k in kids]


def _within(source: SourceFile, node: Tree, depth: int, limit: int, what: str) -> None:
    if depth <= limit:
        return
    meta = node.meta
    span = _span(source, meta.start_pos, meta.end_pos) if not getattr(meta, "empty", True) else _span(source, 0, 1)
    hint = (
        "give parts of it names (`part = ...` on a line of its own)"
        if what == "expression"
        else "nest fewer loops, or write separate ifs instead of a long elif chain"
    )
    raise CompileError([Diagnostic(span, f"{what} nested too deeply: {depth} levels, tilec allows {limit}", hint=hint)])


# ---------------------------------------------------------------- tree -> syntax


def _span(source: SourceFile, start: int, end: int) -> Span:
    n = len(source.text)
    start = max(0, min(start, n))
    return Span(source, start, max(start, min(end, n)))


class _Builder:
    def __init__(self, source: SourceFile):
        self.source = source

    def span(self, node: Tree | Token) -> Span:
        if isinstance(node, Token):
            return _span(self.source, node.start_pos or 0, node.end_pos or 0)
        meta = node.meta
        if getattr(meta, "empty", True):
            return _span(self.source, 0, 0)
        return _span(self.source, meta.start_pos, meta.end_pos)

    def cover(self, a: Tree | Token, b: Tree | Token) -> Span:
        return self.span(a).to(self.span(b))

    # ------------------------------------------------------------ top level

    def module(self, tree: Tree) -> S.Module:
        return S.Module(tuple(self.item(t) for t in tree.children if isinstance(t, Tree)), self.source)

    def item(self, t: Tree) -> S.Item:
        kids = t.children
        if t.data == "import_stmt":
            return S.Import(_unquote(kids[0]), self.span(t))
        if t.data == "param_def":
            name, typ, value, candidates = kids
            return S.ParamDef(
                str(name),
                self.expr(typ) if typ is not None else None,
                self.expr(value),
                self.span(t),
                self.span(name),
                self.candidates(candidates) if candidates is not None else None,
            )
        if t.data == "macro_def":
            name, params, suite = kids
            names = self.names(params) if params is not None else ()
            return S.MacroDef(str(name), names, self.suite(suite), self.header(t, suite), self.span(name))
        assert t.data == "kernel_def", t.data
        name, kparams, suite = kids
        params = tuple(self.kparam(p) for p in kparams.children if p is not None) if kparams is not None else ()
        return S.KernelDef(str(name), params, self.suite(suite), self.header(t, suite), self.span(name))

    def candidates(self, t: Tree) -> S.Tuple:
        """`in (64, 128, 256)`: a parenthesized list of at least one value."""
        e = self.expr(t)
        if isinstance(e, S.Tuple) and e.items:
            return e
        raise error(
            e.span,
            "a param's candidates are a parenthesized list",
            hint="write `in (64, 128, 256)`, or `in (64,)` for one value",
        )

    def kparam(self, t: Tree) -> S.KParam:
        name, typ = t.children
        return S.KParam(str(name), self.expr(typ), self.span(t), self.span(name))

    def names(self, t: Tree) -> tuple[S.Name, ...]:
        return tuple(S.Name(str(tok), self.span(tok)) for tok in t.children if tok is not None)

    def header(self, t: Tree, suite: Tree) -> Span:
        """The span of a compound statement's first line (up to its body);
        headers always start their line (the keyword is not in the tree)."""
        first = self.span(t).start
        line_start = self.source.text.rfind("\n", 0, first) + 1
        start = line_start + len(self.source.text[line_start:first]) - len(self.source.text[line_start:first].lstrip())
        end = self.span(suite).start
        line_end = self.source.text.find("\n", start)
        if line_end >= 0:
            end = min(end, line_end)
        text = self.source.text[start:end].rstrip()
        return _span(self.source, start, start + len(text))

    # ------------------------------------------------------------ statements

    def suite(self, t: Tree) -> tuple[S.Stmt, ...]:
        return tuple(self.stmt(s) for s in t.children if isinstance(s, Tree))

    def stmt(self, t: Tree) -> S.Stmt:
        kids = t.children
        match t.data:
            case "expr_stmt":
                return S.ExprStmt(self.expr(kids[0]), self.span(t))
            case "assign":
                return S.Assign(self.expr(kids[0]), self.expr(kids[1]), self.span(t))
            case "aug_assign":
                op = str(kids[1].children[0])[:-1]
                return S.AugAssign(self.expr(kids[0]), op, self.expr(kids[2]), self.span(t))
            case "pass_stmt":
                return S.Pass(self.span(t))
            case "break_stmt":
                return S.Break(self.span(t))
            case "while_stmt":
                cond, suite = kids
                return S.While(self.expr(cond), self.suite(suite), self.header(t, suite))
            case "for_stmt":
                targets, it, suite = kids
                return S.For(self.names(targets), self.expr(it), self.suite(suite), self.header(t, suite))
            case "if_stmt":
                return self.if_stmt(t)
            case "with_stmt":
                ctx, targets, suite = kids
                return S.With(self.expr(ctx), self.with_targets(targets), self.suite(suite), self.header(t, suite))
        raise AssertionError(t.data)

    def with_targets(self, t: Tree) -> tuple[S.Name, ...]:
        (kid,) = t.children
        if isinstance(kid, Tree):
            return self.names(kid)
        return (S.Name(str(kid), self.span(kid)),)

    def if_stmt(self, t: Tree) -> S.If:
        cond, suite, *rest = t.children
        orelse: tuple[S.Stmt, ...] = ()
        clauses = [c for c in rest if c is not None]
        for clause in reversed(clauses):
            if clause.data == "else_clause":
                orelse = self.suite(clause.children[0])
            else:
                c, s = clause.children
                orelse = (S.If(self.expr(c), self.suite(s), orelse, self.header(clause, s)),)
        return S.If(self.expr(cond), self.suite(suite), orelse, self.header(t, suite))

    # ------------------------------------------------------------ expressions

    def expr(self, t: Tree | Token) -> S.Expr:
        if isinstance(t, Token):  # a bare NAME (kwarg names are handled by call)
            return S.Name(str(t), self.span(t))
        method = getattr(self, "e_" + t.data, None)
        if method is None:
            raise AssertionError(f"no syntax builder for {t.data}")
        return method(t)

    def e_name(self, t: Tree) -> S.Expr:
        return S.Name(str(t.children[0]), self.span(t))

    def e_int(self, t: Tree) -> S.Expr:
        text = str(t.children[0]).replace("_", "")
        try:
            value = int(text, 0) if text[:2].lower() in ("0x", "0b") else int(text, 10)
        except ValueError:
            raise CompileError([Diagnostic(self.span(t), f"invalid number '{t.children[0]}'")]) from None
        return S.Int(value, self.span(t))

    def e_float(self, t: Tree) -> S.Expr:
        try:
            value = float(str(t.children[0]).replace("_", ""))
        except ValueError:
            raise CompileError([Diagnostic(self.span(t), f"invalid number '{t.children[0]}'")]) from None
        return S.Float(value, self.span(t))

    def e_string(self, t: Tree) -> S.Expr:
        return S.Str(_unquote(t.children[0]), self.span(t))

    def e_true(self, t: Tree) -> S.Expr:
        return S.Bool(True, self.span(t))

    def e_false(self, t: Tree) -> S.Expr:
        return S.Bool(False, self.span(t))

    def e_tuple(self, t: Tree) -> S.Expr:
        items = [c for c in t.children if c is not None and not (isinstance(c, Token) and c.type in _BRACKET_TOKENS)]
        return S.Tuple(tuple(self.expr(c) for c in items), self.span(t))

    def e_ifexp(self, t: Tree) -> S.Expr:
        a, cond, b = t.children
        return S.IfExp(self.expr(cond), self.expr(a), self.expr(b), self.span(t))

    def e_not_op(self, t: Tree) -> S.Expr:
        return S.UnaryOp("not", self.expr(t.children[1]), self.span(t))

    def e_unary(self, t: Tree) -> S.Expr:
        op, operand = t.children
        return S.UnaryOp(str(op.children[0]), self.expr(operand), self.span(t))

    def e_pow(self, t: Tree) -> S.Expr:
        a, b = t.children
        return S.BinOp("**", self.expr(a), self.expr(b), self.span(t), self._between(a, b))

    def _between(self, a: Tree | Token, b: Tree | Token) -> Span:
        return _span(self.source, self.span(a).end, self.span(b).start)

    def _chain(self, t: Tree, op: str) -> S.Expr:
        kids = t.children
        result = self.expr(kids[0])
        for prev, k in zip(kids, kids[1:]):
            right = self.expr(k)
            result = S.BinOp(op, result, right, self.cover(kids[0], k), self._between(prev, k))
        return result

    def e_or_test(self, t: Tree) -> S.Expr:
        return self._chain(t, "or")

    def e_and_test(self, t: Tree) -> S.Expr:
        return self._chain(t, "and")

    def e_bor(self, t: Tree) -> S.Expr:
        return self._chain(t, "|")

    def e_bxor(self, t: Tree) -> S.Expr:
        return self._chain(t, "^")

    def e_band(self, t: Tree) -> S.Expr:
        return self._chain(t, "&")

    def _ops(self, t: Tree) -> S.Expr:
        """`a op b op c` with explicit operator subtrees, left-associative."""
        kids = t.children
        result = self.expr(kids[0])
        for i in range(1, len(kids), 2):
            op_tree, right = kids[i], kids[i + 1]
            result = S.BinOp(
                str(op_tree.children[0]), result, self.expr(right), self.cover(kids[0], right), self.span(op_tree)
            )
        return result

    e_shift = e_arith = e_term = _ops

    def e_comparison(self, t: Tree) -> S.Expr:
        kids = t.children
        operands = [self.expr(k) for k in kids[::2]]
        parts: list[S.BinOp] = []
        for i in range(len(operands) - 1):
            op_tree = kids[2 * i + 1]
            a, b = operands[i], operands[i + 1]
            parts.append(S.BinOp(str(op_tree.children[0]), a, b, a.span.to(b.span), self.span(op_tree)))
        result = parts[0]
        for p in parts[1:]:
            result = S.BinOp("and", result, p, result.span.to(p.span), p.op_span)
        return result

    def e_call(self, t: Tree) -> S.Expr:
        func, args = t.children
        positional: list[S.Expr] = []
        keywords: list[S.Keyword] = []
        for a in args.children if args is not None else ():
            if a is None:
                continue
            if isinstance(a, Tree) and a.data == "kwarg":
                name, value = a.children
                keywords.append(S.Keyword(str(name), self.expr(value), self.span(a), self.span(name)))
            elif keywords:
                raise CompileError(
                    [
                        Diagnostic(
                            self.span(a),
                            "positional argument after a keyword argument",
                            hint="put positional arguments first",
                        )
                    ]
                )
            else:
                positional.append(self.expr(a))
        return S.Call(self.expr(func), tuple(positional), tuple(keywords), self.span(t))

    def e_subscript(self, t: Tree) -> S.Expr:
        value, subs = t.children
        items = tuple(self.subscript_item(s) for s in subs.children if s is not None)
        return S.Subscript(self.expr(value), items, self.span(t))

    def subscript_item(self, s: Tree | Token) -> S.Expr | S.Slice:
        if isinstance(s, Tree) and s.data == "slice":
            lo, hi = s.children
            return S.Slice(
                self.expr(lo) if lo is not None else None, self.expr(hi) if hi is not None else None, self.span(s)
            )
        return self.expr(s)

    def e_attr(self, t: Tree) -> S.Expr:
        value, name = t.children
        return S.Attribute(self.expr(value), str(name), self.span(t))


_BRACKET_TOKENS = frozenset({"LPAR", "RPAR", "LSQB", "RSQB"})
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


def _unquote(token: Token | Tree) -> str:  # a STRING token (lark types a child as either)
    body = str(token)[1:-1]
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), body)


# ---------------------------------------------------------------- syntax errors

_WORDS = {
    "_NL": "end of line",
    "$END": "end of file",
    "_INDENT": "an indented block",
    "_DEDENT": "end of the indented block",
    "NAME": "a name",
    "INT": "a number",
    "FLOAT": "a number",
    "STRING": "a string",
}
_EXPR_START = {"NAME", "INT", "FLOAT", "STRING", "LPAR", "LSQB", "MINUS", "PLUS", "TILDE", "NOT", "TRUE", "FALSE"}
_OPERATORS = {
    "+",
    "-",
    "*",
    "/",
    "//",
    "%",
    "**",
    "<<",
    ">>",
    "&",
    "|",
    "^",
    "<",
    ">",
    "==",
    ">=",
    "<=",
    "!=",
    "and",
    "or",
    "if",
    "(",
    "[",
    ".",
}
_HEADERS = {"for", "if", "elif", "else", "with", "kernel", "macro", "while", "def"}
_BRACKETS = {"(": ")", "[": "]"}


def _literal(term: str) -> str | None:
    """The literal text of a string terminal (`'('` for LPAR), else None."""
    for t in _parser().terminals:
        if t.name == term:
            return t.pattern.value if t.pattern.type == "str" else None
    return None


def _expected_words(expected: set[str]) -> list[str]:
    literal = {e: _literal(e) for e in expected}
    words: list[str] = []
    rest = set(expected)
    if {"NAME", "INT"} <= rest:
        words.append("an expression")
        rest -= _EXPR_START
    ops = {e for e in rest if literal[e] in _OPERATORS}
    if len(ops) >= 4:
        words.append("an operator")
        rest -= ops
    named = sorted(_WORDS[e] for e in rest if e in _WORDS)
    quoted = sorted(f"'{literal[e]}'" for e in rest if e not in _WORDS and literal[e] is not None)
    seen: list[str] = []
    for w in words + quoted + named:
        if w not in seen:
            seen.append(w)
    return seen


def _join_or(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " or " + words[-1]


def _found(token: Token) -> str:
    kind = token.type
    if kind in ("_NL", "$END"):
        return _WORDS[kind]
    if kind == "_INDENT":
        return "indent"
    if kind == "_DEDENT":
        return "the end of the indented block"
    if kind == "NAME":
        return f"name '{token}'"
    if kind in ("INT", "FLOAT"):
        return f"number {token}"
    if kind == "STRING":
        return f"string {token}"
    return f"'{token}'"


def _token_span(source: SourceFile, token: Token) -> Span:
    if token.type in ("_INDENT", "_DEDENT"):
        pos = token.start_pos or 0
        return _span(source, pos, pos + 1)
    if token.type == "$END" or token.start_pos is None:
        end = len(source.text.rstrip())
        return _span(source, end, end + 1)
    if token.type == "_NL":  # point just past the last character of the line
        line_start = source.text.rfind("\n", 0, token.start_pos) + 1
        code = source.text[line_start : token.start_pos].rstrip()
        pos = line_start + len(code)
        return _span(source, pos, pos + 1)
    return _span(source, token.start_pos, token.end_pos or token.start_pos + 1)


def _unclosed_bracket(source: SourceFile, offset: int) -> Diagnostic | None:
    """An opening bracket before `offset`, on an earlier line, never closed."""
    stack: list[int] = []
    text = source.text
    i = 0
    while i < min(offset, len(text)):
        ch = text[i]
        if ch == "#":
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl
            continue
        if ch in "\"'":
            m = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"").match(text, i)
            i = m.end() if m else i + 1
            continue
        if ch in "([":
            stack.append(i)
        elif ch in ")]" and stack:
            stack.pop()
        i += 1
    if not stack:
        return None
    pos = stack[-1]
    if "\n" not in text[pos:offset]:
        return None
    opener = text[pos]
    return Diagnostic(
        _span(source, pos, pos + 1), f"'{opener}' is never closed", hint=f"add the missing '{_BRACKETS[opener]}'"
    )


def _header_keyword(source: SourceFile, span: Span) -> str | None:
    m = re.match(r"\s*([A-Za-z_]+)", source.line_text(span.line))
    return m.group(1) if m and m.group(1) in _HEADERS else None


def _accepted(e: UnexpectedInput) -> set[str]:
    """The tokens the parser would really accept here (LALR's own `expected`
    set is widened by merged states)."""
    try:
        accepts = getattr(e, "accepts", None)
    except Exception:  # the interactive parser may not be able to replay
        accepts = None
    return set(accepts or getattr(e, "expected", None) or ())


def _syntax_error(source: SourceFile, e: UnexpectedInput) -> Diagnostic:
    if isinstance(e, UnexpectedCharacters):
        return _bad_character(source, e)
    token = getattr(e, "token", None)
    if not isinstance(token, Token):
        return Diagnostic(_span(source, len(source.text), len(source.text)), "unexpected end of file")
    span = _token_span(source, token)
    expected = _accepted(e)
    unclosed = _unclosed_bracket(source, len(source.text) if token.start_pos is None else token.start_pos)
    if unclosed is not None:
        return unclosed
    if token.type == "_INDENT":
        return Diagnostic(span, "unexpected indent", hint="indent only the body of a for, if, with, kernel or macro")
    if "_INDENT" in expected:
        return Diagnostic(span, "expected an indented block after ':'")
    if token.type == "_DEDENT" and expected and not expected & {"_DEDENT", "_NL"}:
        return Diagnostic(span, "unexpected end of the indented block")
    keyword = _header_keyword(source, span)
    if "COLON" in expected and keyword is not None and token.type != "COLON":
        where = "'else'" if keyword == "else" else f"the {keyword} header"
        hint = "use '==' to compare" if str(token) == "=" else None
        return Diagnostic(span, f"expected ':' after {where}, found {_found(token)}", hint=hint)
    words = _expected_words(expected)
    if not words:
        return Diagnostic(span, f"unexpected {_found(token)}")
    return Diagnostic(span, f"expected {_join_or(words)}, found {_found(token)}")


def _bad_character(source: SourceFile, e: UnexpectedCharacters) -> Diagnostic:
    pos: int = e.pos_in_stream  # type: ignore[assignment]  # lark types the attribute None; this subclass sets it
    ch = source.text[pos] if pos < len(source.text) else ""
    span = _span(source, pos, pos + 1)
    if ch in "\"'":
        return Diagnostic(span, "unterminated string", hint=f"close it with {ch} on the same line")
    if ch == "\t" or ch == " ":
        return Diagnostic(span, "unexpected whitespace")
    return Diagnostic(span, f"unexpected character {ch!r}")


def _dedent_error(source: SourceFile, token: Token) -> Diagnostic:
    pos = token.start_pos or 0
    return Diagnostic(
        _span(source, pos, pos + 1),
        "unindent does not match any outer indentation level",
        hint="indent this line like an enclosing block",
    )
