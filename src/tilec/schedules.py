"""Manual pipeline schedules: `Pipelined(..., order=[...], stage=[...], group=[[...], ...])`.

    for k in Pipelined(n, num_stages=2,            units   stage  order   runs (iteration it)
                       order=[-1, 0, 1],           copy    -1     -1      the compiler's: tile it + 2
                       stage=[-1, 0, 1]):          gemm 1   0      0      on tile it + 1
        copy(K[k * 64, 0], K_shared)          ->   gemm 2   1      1      on tile it
        gemm(Q_shared, K_shared, S)
        gemm(S_cast, V_shared, O)

The scheduled statements of a loop body are its top-level statements but `let` bindings
(TileLang's rule: a binding is replayed where it is used); `group` fuses runs of consecutive
ones into units. A unit of stage s works on iteration k - s while stage 0 works on k: in the
emitted loop it runs `max(stage) - s` iterations ahead of the last stage, in the position its
order gives. A copy of stage -1 is left to the compiler: it runs as far ahead as its tile's
num_stages buffers allow before the first unit that reads the tile.

`read_schedule` reads and checks the lists against the body (elaboration); `plan` checks the
dependences and decides the offsets (plan_pipeline). The rules, exactly:

- every producer copy (a global -> shared copy the plan lets run ahead) is issued at least
  one iteration before each unit reading its tile, and at most num_stages - 1 (its tile has
  num_stages buffers); stage -1 takes the most;
- any other two units a before b in the body that share a buffer one of them writes: the
  same stage with order[a] < order[b], or b in the next stage with order[b] < order[a] (b then
  works on the iteration before a's, and reads that iteration's value before a overwrites it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tilec import syntax as S
from tilec import tir, tir_walk
from tilec.diagnostics import CompileError, Diagnostic, Note, error

MAX_STAGES = 16  # each stage is an iteration of prologue, written out
ConstInt = Callable[[S.Expr, str], int]  # a compile-time integer of the source, or a located error


def read_schedule(
    args: dict[str, S.Expr], body: tuple[tir.Stmt, ...], stages: int, const_int: ConstInt
) -> tuple[tir.Schedule | None, int]:
    """The schedule `Pipelined(...)` asks for (None: none) and the loop's num_stages: as given, or
    max(stage) + 1 when not given."""
    order_n, stage_n, group_n = args.get("order"), args.get("stage"), args.get("group")
    if order_n is None and stage_n is None:
        if group_n is not None:
            raise error(group_n.span, "group= needs order= and stage=", hint="give each group a stage and an order")
        return None, stages
    if order_n is None or stage_n is None:
        given, missing = ("order", "stage") if stage_n is None else ("stage", "order")
        at = order_n if order_n is not None else stage_n
        assert at is not None
        raise error(at.span, f"{given}= needs {missing}= too", hint="a manual schedule gives both lists")
    stmts = [i for i, s in enumerate(body) if not isinstance(s, tir.Let)]
    units = _units(group_n, stmts, const_int)
    what = "groups" if group_n is not None else "scheduled statements"
    order = _ints(order_n, "order", len(units), what, const_int)
    stage = _ints(stage_n, "stage", len(units), what, const_int)
    _check_lists(order_n, stage_n, order, stage, stages)
    for u, st in zip(units, stage):
        if st == -1:
            _check_left_to_compiler(body, u)
    stages = stages if stages > 0 else max(stage) + 1
    if stages < 2:
        hint = "give a later statement stage 1, or num_stages=2 or more for the copies of stage -1"
        raise error(stage_n.span, "this schedule puts every statement in stage 0: nothing runs ahead", hint=hint)
    return tir.Schedule(units, stage, order, stage_n.span), stages


def _units(group_n: S.Expr | None, stmts: list[int], const_int: ConstInt) -> tuple[tuple[int, ...], ...]:
    """Each unit's positions in the body: one statement each, or the runs `group` lists."""
    if group_n is None:
        return tuple((i,) for i in stmts)
    if not isinstance(group_n, S.Tuple) or not all(isinstance(g, S.Tuple) for g in group_n.items):
        raise error(group_n.span, "group= takes a list of lists of statement numbers, as [[0], [1, 2]]")
    groups = [[const_int(x, "a statement number") for x in g.items] for g in group_n.items if isinstance(g, S.Tuple)]
    flat = [i for g in groups for i in g]
    if flat != list(range(len(stmts))) or any(not g for g in groups):
        raise error(
            group_n.span,
            f"group= must list the loop body's {len(stmts)} scheduled statements 0..{len(stmts) - 1} in order, "
            "each group a run of consecutive ones",
            hint="statements are counted from 0 at the top of the body; `let` bindings are not counted",
        )
    return tuple(tuple(stmts[i] for i in g) for g in groups)


def _ints(node: S.Expr, name: str, n: int, what: str, const_int: ConstInt) -> tuple[int, ...]:
    if not isinstance(node, S.Tuple):
        raise error(
            node.span,
            f"{name}= takes a list of integers, one per {what[:-1]}",
            hint=f"write it as a list: {name}=[...]",
        )
    if len(node.items) != n:
        raise error(
            node.span,
            f"{name}= has {len(node.items)} entr{'y' if len(node.items) == 1 else 'ies'}, "
            f"but the loop body has {n} {what}",
            hint="one entry per top-level statement of the body, or per group with group=; "
            "`let` bindings are not counted",
        )
    return tuple(const_int(x, f"an entry of {name}=") for x in node.items)


def _check_lists(order_n: S.Expr, stage_n: S.Expr, order: tuple[int, ...], stage: tuple[int, ...], stages: int) -> None:
    for u, (o, st) in enumerate(zip(order, stage)):
        if st >= MAX_STAGES:
            raise error(stage_n.span, f"stage {st} of entry {u} is over tilec's limit: stages are below {MAX_STAGES}")
        if st < -1 or (stages > 0 and st >= stages):
            limit = f" and below num_stages={stages}" if stages > 0 else ""
            raise error(stage_n.span, f"stage {st} of entry {u} is out of range: stages are -1 or more{limit}")
        if (o == -1) != (st == -1):
            raise error(
                order_n.span,
                f"entry {u} has stage {st} but order {o}: -1 goes in both lists or in neither",
                hint="stage -1 and order -1 together leave a copy to the compiler",
            )
    placed = sorted(o for o in order if o != -1)
    if placed != list(range(len(placed))):
        twice = next((o for o in placed if placed.count(o) > 1), None)
        why = f"{twice} appears twice" if twice is not None else f"it should hold 0..{len(placed) - 1} once each"
        raise error(
            order_n.span,
            f"order= is not a permutation of the scheduled units: {why}",
            hint="order gives each unit its place in the emitted iteration, 0, 1, ... once each "
            "(-1 only with stage -1)",
        )
    if not placed:
        raise error(stage_n.span, "every entry is -1: the schedule places nothing", hint="give the statements stages")


def _check_left_to_compiler(body: tuple[tir.Stmt, ...], unit: tuple[int, ...]) -> None:
    s = body[unit[0]]
    is_copy = isinstance(s, tir.Copy) and s.src.buffer.scope == "global" and s.dst.buffer.scope == "shared"
    if len(unit) != 1 or not is_copy:
        what = "a group of statements" if len(unit) > 1 else "this statement"
        raise error(
            s.span,
            f"stage -1 leaves a copy to the compiler, but {what} is not one copy from a tensor into shared memory",
            hint="give it a stage of 0 or more, and an order",
        )


# ------------------------------------------------------------------------------------ the plan


def as_inferred(loop: tir.For, producers: list[tir.Copy]) -> bool:
    """Whether `loop`'s schedule is the pipeline the compiler infers (`producers`: the copies it
    runs ahead): every such copy in a unit of its own kind, of stage 0 or -1 (an explicit one
    ordered before every other unit), every other unit in the last stage (num_stages - 1), in the
    body's order."""
    sched = loop.schedule
    assert sched is not None
    kept = running_ahead(loop, producers)
    if len(kept) != len(producers):
        return False
    last = loop.num_stages - 1
    copies = _producer_units(loop, {id(c) for c in kept})
    rest = [u for u in range(len(sched.units)) if u not in copies]
    if any(sched.stage[u] not in (0, -1) for u in copies) or any(sched.stage[u] != last for u in rest):
        return False
    orders = [sched.order[u] for u in rest]
    first_rest = min(orders, default=len(sched.units))
    return orders == sorted(orders) and all(sched.order[u] < first_rest for u in copies if sched.order[u] != -1)


def running_ahead(loop: tir.For, producers: list[tir.Copy]) -> list[tir.Copy]:
    """The copies that may run ahead and do, under `loop`'s schedule: those whose unit holds only
    such copies (a copy grouped with other statements runs in their iteration, as they do)."""
    sched = loop.schedule
    assert sched is not None
    ids = {id(c) for c in producers}
    kept = {id(loop.body[p]) for u in _producer_units(loop, ids) for p in sched.units[u]}
    return [c for c in producers if id(c) in kept]


def _producer_units(loop: tir.For, ids: set[int]) -> list[int]:
    """The units of `loop`'s schedule made only of copies in `ids` (copies that may run ahead)."""
    sched = loop.schedule
    assert sched is not None
    return [u for u, pos in enumerate(sched.units) if all(id(loop.body[p]) in ids for p in pos)]


def plan(loop: tir.For, producers: list[tir.Copy], honoured: bool) -> tir.Schedule:
    """The schedule of `loop` with the plan on it (offsets, the wait's count), or the located
    errors of a schedule that would read data before it is written or after it is overwritten.
    `producers`: the copies the inferred pipeline runs ahead; `honoured`: lowering follows the
    schedule (else it runs as the inferred pipeline, and only the checks are made)."""
    sched = loop.schedule
    assert sched is not None
    if as_inferred(loop, producers):
        return replace(sched, as_inferred=True)
    ids = {id(c) for c in running_ahead(loop, producers)}
    prod = set(_producer_units(loop, ids))
    last = max(sched.stage)
    ahead = [last - st if st >= 0 else 0 for st in sched.stage]
    readers: dict[int, list[int]] = {u: [] for u in prod}
    for u in prod:
        tiles = {c.dst.buffer for p in sched.units[u] if isinstance(c := loop.body[p], tir.Copy)}
        readers[u] = [
            r
            for r, pos in enumerate(sched.units)
            if r not in prod and any(tiles & _shared_reads(loop.body[p]) for p in pos)
        ]
    for u in prod:
        _check_copy_stage(loop, sched, u, readers[u])
        if sched.stage[u] == -1:
            ahead[u] = loop.num_stages - 1 + min((ahead[r] for r in readers[u]), default=0)
    diagnostics = [d for u in sorted(prod) for d in _lead_errors(loop, sched, u, readers[u], ahead)][:1]
    diagnostics = diagnostics or _dependence_errors(loop, sched, prod)
    if diagnostics:
        raise CompileError(diagnostics)
    leads = [ahead[u] - ahead[r] for u in prod for r in readers[u]]
    pending = min(leads, default=1) - 1
    return replace(sched, ahead=tuple(ahead), pending=pending, honoured=honoured)


def _shared_reads(s: tir.Stmt) -> set[tir.Buffer]:
    """The shared tiles `s` reads (sync.shared_reads_writes's reads; that module is the code
    generator's, which `tilec check` does not load)."""
    reads, _ = _accesses_of((s,))
    return {b for b in reads if b.scope == "shared"}


def _check_copy_stage(loop: tir.For, sched: tir.Schedule, u: int, readers: list[int]) -> None:
    """A producer copy of an explicit stage needs every reader of its tile in a later stage."""
    st = sched.stage[u]
    if st == -1:
        return
    late = next((r for r in readers if sched.stage[r] <= st), None)
    if late is None:
        return
    copy, reader = loop.body[sched.units[u][0]], loop.body[sched.units[late][0]]
    assert isinstance(copy, tir.Copy)
    raise CompileError(
        [
            Diagnostic(
                copy.span,
                f"the copy into '{copy.dst.buffer.name}' has stage {st}, but a statement reading its tile has "
                f"stage {sched.stage[late]}: the copy would not run ahead of it",
                notes=(Note(reader.span, f"'{copy.dst.buffer.name}' is read here"),),
                hint=f"give the copy a smaller stage than every reader of '{copy.dst.buffer.name}', or stage -1 "
                "and order -1 to let the compiler place it",
            )
        ]
    )


def _lead_errors(loop: tir.For, sched: tir.Schedule, u: int, readers: list[int], ahead: list[int]) -> list[Diagnostic]:
    """A producer runs ahead of the readers of its tile by 1 .. num_stages - 1 iterations: its
    readers' stages lie within num_stages - 2 of each other (a copy of stage -1)."""
    copy = loop.body[sched.units[u][0]]
    assert isinstance(copy, tir.Copy)
    tile = copy.dst.buffer.name
    leads = {r: ahead[u] - ahead[r] for r in readers}
    bad = next((r for r in readers if not 1 <= leads[r] <= loop.num_stages - 1), None)
    if bad is None:
        return []
    spread = max(ahead[r] for r in readers) - min(ahead[r] for r in readers)
    reader = loop.body[sched.units[bad][0]]
    return [
        Diagnostic(
            copy.span,
            f"the copy into '{tile}' cannot run ahead of every statement reading its tile: their stages are "
            f"{spread} apart, and num_stages={loop.num_stages} keeps {loop.num_stages} copies of '{tile}'",
            notes=(Note(reader.span, f"'{tile}' is read here (stage {sched.stage[bad]})"),),
            hint=f"raise num_stages to {spread + 2}, or bring the readers of '{tile}' into nearer stages",
        )
    ]


def _dependence_errors(loop: tir.For, sched: tir.Schedule, prod: set[int]) -> list[Diagnostic]:
    """Units a before b sharing a buffer one of them writes (producers' tiles aside): the same
    stage with a before b in order, or b one stage later and before a in order."""
    produced = {s.dst.buffer for u in prod for p in sched.units[u] if isinstance(s := loop.body[p], tir.Copy)}
    units = [u for u in range(len(sched.units)) if u not in prod]
    access = {u: _accesses(loop, sched.units[u], produced) for u in units}
    out: list[Diagnostic] = []
    for i, a in enumerate(units):
        for b in units[i + 1 :]:
            (ra, wa), (rb, wb) = access[a], access[b]
            shared = sorted(((wa & (rb | wb)) | (ra & wb)), key=lambda x: x.name)
            if not shared or _respects(sched, a, b):
                continue
            out.append(_dependence_error(loop, sched, a, b, shared[0]))
            return out
    return out


def _respects(sched: tir.Schedule, a: int, b: int) -> bool:
    sa, sb, oa, ob = sched.stage[a], sched.stage[b], sched.order[a], sched.order[b]
    return (sa == sb and oa < ob) or (sb == sa + 1 and ob < oa)


def _accesses(
    loop: tir.For, pos: tuple[int, ...], produced: set[tir.Buffer]
) -> tuple[set[tir.Buffer], set[tir.Buffer]]:
    """The buffers a unit reads and writes (every scope; the producers' tiles left out)."""
    reads, writes = _accesses_of(tuple(loop.body[p] for p in pos))
    return reads - produced, writes - produced


def _accesses_of(stmts: tuple[tir.Stmt, ...]) -> tuple[set[tir.Buffer], set[tir.Buffer]]:
    """The buffers `stmts` (and the statements inside them) read and write: destinations are
    written, other operands and every loaded element read."""
    reads: set[tir.Buffer] = set()
    writes: set[tir.Buffer] = set()
    for x in tir_walk.stmts(stmts):
        w = set(tir_walk.written(x))
        writes |= w
        reads |= {r.buffer for r in tir_walk.regions(x) if r.buffer not in w}
        reads |= {ld.buffer for e in tir_walk.stmt_exprs(x) for ld in tir_walk.loads(e)}
    return reads, writes


def _dependence_error(loop: tir.For, sched: tir.Schedule, a: int, b: int, buf: tir.Buffer) -> Diagnostic:
    first, second = loop.body[sched.units[a][0]], loop.body[sched.units[b][0]]
    sa, sb, oa, ob = sched.stage[a], sched.stage[b], sched.order[a], sched.order[b]
    return Diagnostic(
        second.span,
        f"the schedule breaks the dependence on '{buf.name}' between this statement (stage {sb}, order {ob}) "
        f"and the one at line {first.span.line} (stage {sa}, order {oa}), which comes first in the loop body",
        notes=(Note(first.span, f"'{buf.name}' is used here too, and one of the two writes it"),),
        hint="statements sharing a buffer need the same stage with the earlier one first in order, or the "
        "later one in the next stage and first in order (it then works on the iteration before)",
    )


def check_lets(loop: tir.For, sched: tir.Schedule, producer_ids: set[int]) -> None:
    """Lets of a manually scheduled body are lowered once, at the top of the iteration: their
    users must work on the last stage's iteration (copies aside, which take the value into their
    indices), and their values may not read a buffer the body writes."""
    written = {b for s in tir_walk.stmts(loop.body) for b in tir_walk.written(s)}
    unit_of = {p: u for u, pos in enumerate(sched.units) for p in pos}
    for s in loop.body:
        if not isinstance(s, tir.Let):
            continue
        read = next((ld.buffer for ld in tir_walk.loads(s.value) if ld.buffer in written), None)
        if read is not None:
            raise error(
                s.span,
                f"'{s.var.name}' reads '{read.name}', which the manually scheduled loop body writes",
                hint="a binding of a scheduled body is computed at the top of the iteration: read the buffer "
                "inside the statement that needs it",
            )
        for p, t in enumerate(loop.body):
            u = unit_of.get(p)
            if u is None or sched.ahead[u] == 0 or id(t) in producer_ids:
                continue
            if s.var in {
                v for x in tir_walk.stmts((t,)) for e in tir_walk.stmt_exprs(x) for v in tir_walk.variables(e)
            }:
                raise _let_ahead_error(s, t, sched.stage[u])


def _let_ahead_error(s: tir.Let, t: tir.Stmt, stage: int) -> CompileError:
    return CompileError(
        [
            Diagnostic(
                t.span,
                f"this statement has stage {stage} and runs ahead of the loop's last stage, but uses "
                f"'{s.var.name}', bound in the loop body for the last stage's iteration",
                notes=(Note(s.span, f"'{s.var.name}' is bound here"),),
                hint=f"compute '{s.var.name}' from the loop variable inside the statement, or give the "
                "statement the last stage",
            )
        ]
    )
