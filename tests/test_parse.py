"""Parser: the grammar is strict LALR, every node carries a span, and syntax
errors read as sentences (the exact texts live in tests/golden/errors)."""

from __future__ import annotations

import pytest
from lark import Lark

from tilec import syntax as S
from tilec.diagnostics import CompileError
from tilec.parse import TileIndenter, grammar_text, parse
from tilec.source import SourceFile


def p(text: str) -> S.Module:
    return parse(SourceFile("t.tile", text))


def body(text: str) -> tuple[S.Stmt, ...]:
    """The statements of a one-kernel file whose body is `text` (indented 4)."""
    src = "kernel k():\n" + "".join("    " + line + "\n" for line in text.splitlines())
    (k,) = p(src).items
    assert isinstance(k, S.KernelDef)
    return k.body


def expr(text: str) -> S.Expr:
    (s,) = body(f"x = {text}")
    assert isinstance(s, S.Assign)
    return s.value


def err(text: str) -> str:
    with pytest.raises(CompileError) as info:
        p(text)
    (d,) = info.value.diagnostics
    return d.message


def test_grammar_is_strict_lalr() -> None:
    pytest.importorskip("interegular")
    Lark(grammar_text(), start="module", parser="lalr", lexer="basic", postlex=TileIndenter(), strict=True)


def test_grammar_file_in_repo_is_the_package_one() -> None:
    import pathlib

    root = pathlib.Path(__file__).resolve().parent.parent
    assert (root / "grammar" / "tile.lark").read_text() == grammar_text()


def test_top_level_items() -> None:
    m = p(
        'import "lib/common.tile"\nparam a = 1\nparam b: float = 2.5\nmacro m(x, y):\n    pass\n'
        "kernel k(A: Tensor((M, 4), float16), s: float32):\n    pass\n"
    )
    imp, a, b, mac, k = m.items
    assert isinstance(imp, S.Import) and imp.path == "lib/common.tile"
    assert isinstance(a, S.ParamDef) and a.type is None and isinstance(a.value, S.Int)
    assert isinstance(b, S.ParamDef) and isinstance(b.type, S.Name) and b.type.id == "float"
    assert isinstance(mac, S.MacroDef) and [x.id for x in mac.params] == ["x", "y"]
    assert isinstance(k, S.KernelDef) and [q.name for q in k.params] == ["A", "s"]


def test_comments_blank_lines_and_no_final_newline() -> None:
    m = p("# header\n\nparam a = 1  # trailing\n\n\n# between\nparam b = 2")
    assert [i.name for i in m.items] == ["a", "b"]  # type: ignore[union-attr]


def test_precedence_follows_python() -> None:
    e = expr("1 + 2 * 3 ** 2")
    assert isinstance(e, S.BinOp) and e.op == "+"
    assert isinstance(e.right, S.BinOp) and e.right.op == "*"
    assert isinstance(e.right.right, S.BinOp) and e.right.right.op == "**"
    e = expr("-a ** 2")
    assert isinstance(e, S.UnaryOp) and isinstance(e.operand, S.BinOp)
    e = expr("a if b or c and not d else e")
    assert isinstance(e, S.IfExp) and isinstance(e.cond, S.BinOp) and e.cond.op == "or"
    e = expr("a & b | c ^ d << 1")
    assert isinstance(e, S.BinOp) and e.op == "|"


def test_left_associative() -> None:
    e = expr("a - b - c")
    assert isinstance(e, S.BinOp) and isinstance(e.left, S.BinOp) and e.left.op == "-"
    assert e.right == S.Name("c", e.right.span)


def test_chained_comparison_is_and() -> None:
    e = expr("0 <= i < n")
    assert isinstance(e, S.BinOp) and e.op == "and"
    assert isinstance(e.left, S.BinOp) and e.left.op == "<="
    assert isinstance(e.right, S.BinOp) and e.right.op == "<"


def test_literals() -> None:
    assert expr("0x10") == S.Int(16, expr("0x10").span)
    assert isinstance(expr("1e-6"), S.Float) and expr("1e-6").value == 1e-6  # type: ignore[union-attr]
    assert isinstance(expr("1_000"), S.Int) and expr("1_000").value == 1000  # type: ignore[union-attr]
    assert isinstance(expr("True"), S.Bool)
    assert expr('"a\\"b"').value == 'a"b'  # type: ignore[union-attr]


def test_calls_keywords_subscripts_slices() -> None:
    e = expr("gemm(A, B, C, transpose_B=True)")
    assert isinstance(e, S.Call) and len(e.args) == 3 and e.keywords[0].name == "transpose_B"
    e = expr("Q[bz, :, bx * 64:(bx + 1) * 64, 3:]")
    assert isinstance(e, S.Subscript) and len(e.indices) == 4
    whole, part, tail = e.indices[1], e.indices[2], e.indices[3]
    assert isinstance(whole, S.Slice) and whole.lo is None and whole.hi is None
    assert isinstance(part, S.Slice) and part.lo is not None and part.hi is not None
    assert isinstance(tail, S.Slice) and tail.hi is None


def test_tuples() -> None:
    assert expr("(1,)") == S.Tuple((S.Int(1, expr("(1,)").items[0].span),), expr("(1,)").span)  # type: ignore[union-attr]
    assert isinstance(expr("(1, 2)"), S.Tuple) and len(expr("(1, 2, )").items) == 2  # type: ignore[union-attr]
    assert isinstance(expr("[64, 32]"), S.Tuple)
    assert isinstance(expr("(1)"), S.Int)
    assert expr("()").items == ()  # type: ignore[union-attr]


def test_statements() -> None:
    stmts = body(
        "x = 1\nA[i] += 2\nfor i, j in Parallel(4, 4):\n    pass\n"
        "if a:\n    pass\nelif b:\n    pass\nelse:\n    pass\nwith Kernel(1) as (bx, by):\n    pass\n"
        "with Kernel(1) as bx:\n    copy(a, b)"
    )
    assign, aug, loop, cond, w2, w1 = stmts
    assert isinstance(assign, S.Assign)
    assert isinstance(aug, S.AugAssign) and aug.op == "+"
    assert isinstance(loop, S.For) and [t.id for t in loop.targets] == ["i", "j"]
    assert isinstance(cond, S.If) and isinstance(cond.orelse[0], S.If) and cond.orelse[0].orelse
    assert isinstance(w2, S.With) and [t.id for t in w2.targets] == ["bx", "by"]
    assert isinstance(w1, S.With) and isinstance(w1.body[0], S.ExprStmt)


def test_parentheses_continue_lines() -> None:
    (s,) = body("copy(A[0,\n          1],\n     B)")
    assert isinstance(s, S.ExprStmt)
    (s,) = body("x = 1 + \\\n    2")
    assert isinstance(s, S.Assign)


def test_spans_point_at_source() -> None:
    src = "kernel k():\n    x = foo(a, b=1)\n"
    (k,) = p(src).items
    (s,) = k.body  # type: ignore[union-attr]
    assert s.span.text == "x = foo(a, b=1)"
    assert s.value.span.text == "foo(a, b=1)"  # type: ignore[union-attr]
    assert s.value.keywords[0].span.text == "b=1"  # type: ignore[union-attr]
    assert (s.span.line, s.span.column) == (2, 5)


def test_header_spans_cover_the_first_line() -> None:
    (loop,) = body("for i in serial(4):\n    pass")
    assert loop.span.text == "for i in serial(4):"
    (k,) = p("kernel k(A: Tensor((N,), float32)):\n    pass\n").items
    assert k.span.text == "kernel k(A: Tensor((N,), float32)):"


def test_operator_spans() -> None:
    e = expr("a  +  b")
    assert isinstance(e, S.BinOp) and e.op_span.text.strip() == "+"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kernel k()\n    pass\n", "expected ':' after the kernel header, found end of line"),
        ("kernel k():\n    x = 1\n        y = 2\n", "unexpected indent"),
        ("kernel k():\npass\n", "expected an indented block after ':'"),
        ("kernel k():\n    x = (1,\n    y = 2\n", "'(' is never closed"),
        ("kernel k():\n    x = 1 +\n", "expected an expression, found end of line"),
        ("kernel k():\n    x = @\n", "unexpected character '@'"),
        ("param = 1\n", "expected a name, found '='"),
        ("kernel k():\n    f(a=1, b)\n", "positional argument after a keyword argument"),
        ("kernel k():\n    x = 0x\n", "expected an operator or end of line, found name 'x'"),
    ],
)
def test_syntax_errors_read_as_sentences(text: str, message: str) -> None:
    assert err(text) == message


def test_syntax_errors_never_mention_lark_token_names() -> None:
    for text in [
        "kernel",
        "kernel k(",
        "param x = ",
        "macro m(a b):",
        "kernel k():\n  for :\n",
        "x y z",
        "kernel k():\n    with Kernel(1) as bx\n",
        "import 3\n",
        "kernel k(): x y\n",
        "(((\n",
    ]:
        message = err(text)
        for raw in ("LPAR", "RPAR", "_NL", "NAME", "$END", "_INDENT", "_DEDENT", "COLON", "__ANON"):
            assert raw not in message, (text, message)


def test_while_and_break_parse() -> None:
    (loop,) = body("while n < 4:\n    if n == 2:\n        break\n    n += 1")
    assert isinstance(loop, S.While) and loop.span.text == "while n < 4:"
    first, _ = loop.body
    assert isinstance(first, S.If) and isinstance(first.then[0], S.Break)
