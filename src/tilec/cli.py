"""The command line: `tilec build`, `tilec check`, `tilec explain`, `tilec import-tilelang`, `tilec --version`,
`tilec --cmake-dir`.

    tilec build examples/gemm.tile -o build/gemm.cu --arch sm_90a --cubin build/gemm.cubin
    tilec build a.tile b.tile --out-dir gen/ -MD          # gen/a.cu gen/a.d gen/b.cu gen/b.d
    tilec build k.tile -o k.cu --check                    # exit 1 + unified diff if k.cu is stale
    tilec check examples/*.tile -D BLOCK=64
    tilec build k.tile -o k.cu -Werror -Wno-register-spill   # tilec's warnings: errors, one silenced

Exit codes: 0 ok, 1 user error (diagnostics, bad options, --check mismatch),
2 internal compiler error (a bug in tilec), 3 toolchain failure (nvcc, clang-format).

Only click is imported up front: rich only when stderr is a terminal, the
compiler's stages inside the driver, TVM never from here; `tilec check` and
cache hits stay fast.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from dataclasses import replace as dataclass_replace

import click

import tilec
from tilec import driver, timing
from tilec.diagnostics import WARNINGS, Diagnostic, WarningOptions
from tilec.targets import ARCHES
from tilec.toolchain import ToolchainError

OK, USER_ERROR, INTERNAL_ERROR, TOOLCHAIN_ERROR = 0, 1, 2, 3
_SEVERITY = {OK: 0, USER_ERROR: 1, TOOLCHAIN_ERROR: 2, INTERNAL_ERROR: 3}


def cmake_dir() -> str:
    """Where TilecConfig.cmake lives (for `find_package(Tilec)`)."""
    return os.path.join(os.path.dirname(os.path.abspath(tilec.__file__)), "cmake")


def _print_cmake_dir(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(cmake_dir())
        ctx.exit(0)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(tilec.__version__, prog_name="tilec", message="%(prog)s %(version)s")
@click.option(
    "--cmake-dir",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=_print_cmake_dir,
    help="Print the directory holding TilecConfig.cmake and exit.",
)
def cli() -> None:
    """tilec: compile .tile GPU kernels to readable CUDA C++."""


# ---------------------------------------------------------------- reporting


def _stderr_is_tty() -> bool:
    return sys.stderr.isatty() and os.environ.get("NO_COLOR") is None


def report(text: str) -> None:
    """Diagnostics text on stderr, coloured only when stderr is a terminal."""
    if not text:
        return
    if not _stderr_is_tty():
        sys.stderr.write(text if text.endswith("\n") else text + "\n")
        sys.stderr.flush()
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    for line in text.rstrip("\n").split("\n"):
        console.print(_colour_line(Text, line))


def _colour_line(text_cls, line: str):
    text = text_cls(line)
    stripped = line.strip()
    for word, style in ((": error:", "bold red"), (": warning:", "bold magenta"), (": note:", "bold blue")):
        at = line.find(word)
        if at >= 0:
            text.stylize("bold", 0, at)
            text.stylize(style, at + 2, at + len(word))
    if line.startswith(("error:", "internal compiler error")):
        text.stylize("bold red", 0, line.find(":") + 1)
    if line.startswith("hint:"):
        text.stylize("cyan")
    if stripped.startswith("|") and set(stripped[1:].strip()) <= {"^", "~"} and "^" in stripped:
        text.stylize("bold green", line.index("^"))
    return text


def report_exception(exc: BaseException, path: str) -> int:
    """Print a CompileError / ToolchainError / anything else; return the exit code."""
    from tilec.diagnostics import CompileError, render_all

    if isinstance(exc, CompileError):
        report(render_all(exc.diagnostics))
        return USER_ERROR
    if isinstance(exc, ToolchainError):
        report(f"error: {exc}")
        return TOOLCHAIN_ERROR
    if isinstance(exc, OSError) and exc.filename is not None:
        report(f"error: {exc.filename}: {exc.strerror}")
        return USER_ERROR
    import traceback

    tb = "".join(traceback.format_exception(exc, limit=-8))
    report(
        f"internal compiler error while compiling {path}: {type(exc).__name__}: {exc}\n"
        "This is a bug in tilec, not in your program; please report it with the file that triggered it.\n" + tb
    )
    return INTERNAL_ERROR


def worst(codes: Sequence[int]) -> int:
    return max(codes, key=lambda c: _SEVERITY[c], default=OK)


# ---------------------------------------------------------------- options


def parse_defines(values: Sequence[str]) -> dict[str, str]:
    defines: dict[str, str] = {}
    for item in values:
        name, eq, value = item.partition("=")
        name = name.strip()
        if not eq or not name.isidentifier():
            raise click.BadParameter(f"'{item}' is not NAME=VALUE", param_hint="-D")
        if not value.strip():
            raise click.BadParameter(f"'{item}' has an empty value", param_hint="-D")
        defines[name] = value.strip()
    return defines


def define_option(f):
    return click.option(
        "-D",
        "defines",
        multiple=True,
        metavar="NAME=VALUE",
        help="Override a `param` of the kernel file (repeatable).",
    )(f)


def warning_option(f):
    return click.option(
        "-W",
        "warning_flags",
        multiple=True,
        metavar="NAME",
        help="Warnings as gcc spells them: -Werror (warnings are errors, nvcc's too), -Werror=NAME, "
        "-Wno-NAME (silence one), -WNAME, -Wno-error. Names: " + ", ".join(WARNINGS) + ".",
    )(f)


def parse_warning_flags(values: Sequence[str]) -> WarningOptions:
    """-W values in order, later ones winning (as gcc reads them) -> WarningOptions."""
    disabled: set[str] = set()
    errors: set[str] = set()
    werror = False
    for value in values:
        negated = value.startswith("no-")
        name = value.removeprefix("no-")
        if name == "error":
            werror = not negated
            continue
        if name.startswith("error=") and not negated:
            name = name.removeprefix("error=")
            errors.add(name)
        if name not in WARNINGS:
            known = ", ".join(WARNINGS)
            raise click.BadParameter(f"-W{value}: no warning '{name}' (tilec's warnings: {known})", param_hint="-W")
        if negated:
            disabled.add(name)
        else:
            disabled.discard(name)
    return WarningOptions(frozenset(disabled), werror, frozenset(errors))


def arch_option(f):
    return click.option(
        "--arch", type=click.Choice(ARCHES), default="sm_80", show_default=True, help="Target GPU architecture."
    )(f)


# ---------------------------------------------------------------- build


@dataclass
class Job:
    """One input file of `tilec build` and where its outputs go."""

    source: str
    cu: str | None  # None: stdout (or a temporary file when only a binary is wanted)
    header: str | None = None
    depfile: str | None = None
    binary: tuple[str, str] | None = None  # (kind, path)
    written: list[str] = field(default_factory=list)
    tuned: str | None = None  # the --tuned file (the depfile lists it)

    def outputs(self) -> list[str]:
        paths = [self.cu, self.header, self.binary[1] if self.binary else None, self.depfile]
        return [p for p in paths if p]


@dataclass(frozen=True)
class BuildOptions:
    defines: dict[str, str]
    arch: str
    emit: str
    after: str | None
    check: bool
    cache: bool
    werror: bool  # nvcc's warnings are errors (--werror, or -Werror)
    phony: bool
    warnings: WarningOptions = WarningOptions()
    includes: tuple[str, ...] = ()  # --include: headers of call_extern's device functions


@cli.command()
@click.argument("inputs", nargs=-1, required=True, metavar="IN.tile...")
@click.option("-o", "--output", metavar="OUT.cu", help="Output file (one input); stdout if omitted.")
@click.option("--out-dir", metavar="DIR", help="Write DIR/NAME.cu for each input NAME.tile (many inputs).")
@arch_option
@define_option
@click.option("--emit", type=click.Choice(driver.EMITS), default="cuda", show_default=True, help="What to write.")
@click.option(
    "--after", metavar="PASS", help="With --emit tir|thread: the IR as pass PASS leaves it (e.g. lower, elaborate)."
)
@click.option("--header", metavar="OUT.h", help="Also write the launchers' C prototypes.")
@click.option("--headers", is_flag=True, help="With --out-dir: also write DIR/NAME.h.")
@click.option("--cubin", metavar="OUT.cubin", help="Also compile with nvcc to a cubin.")
@click.option("--hsaco", metavar="OUT.hsaco", help="Also compile with hipcc to a code object (--arch gfx*).")
@click.option("--obj", metavar="OUT.o", help="Also compile with nvcc to an object file.")
@click.option("--shared", metavar="OUT.so", help="Also compile with nvcc to a shared library.")
@click.option("-MD", "make_deps", is_flag=True, help="Write a Make depfile (OUT.d, or the -MF path).")
@click.option("-MF", "depfile", metavar="FILE.d", help="Depfile path (implies -MD).")
@click.option("-MP", "phony", is_flag=True, help="Add a phony target per imported file (as gcc -MP).")
@click.option("--check", is_flag=True, help="Compare with the existing output instead of writing: exit 1 + diff.")
@click.option("--no-cache", is_flag=True, help="Do not use the content-hash build cache.")
@click.option("--werror", is_flag=True, help="nvcc: treat nvcc's warnings as errors (-Werror: tilec's too).")
@warning_option
@click.option("--time", "show_time", is_flag=True, help="Print the time spent per phase on stderr.")
@click.option("--tuned", metavar="FILE.tune.json", help="Apply the configuration `tilec tune` chose (one input).")
@click.option("--verify", "verify_bounds", is_flag=True, help="Prove every index in bounds (TVM's analyzer; slower).")
@click.option(
    "--include",
    "includes",
    multiple=True,
    metavar="HEADER",
    help="#include HEADER in the output (call_extern's device functions), relative to the output's folder.",
)
def build(
    inputs: tuple[str, ...],
    output: str | None,
    out_dir: str | None,
    arch: str,
    defines: tuple[str, ...],
    emit: str,
    after: str | None,
    header: str | None,
    headers: bool,
    cubin: str | None,
    hsaco: str | None,
    obj: str | None,
    shared: str | None,
    make_deps: bool,
    depfile: str | None,
    phony: bool,
    check: bool,
    no_cache: bool,
    werror: bool,
    warning_flags: tuple[str, ...],
    show_time: bool,
    tuned: str | None,
    verify_bounds: bool,
    includes: tuple[str, ...],
) -> None:
    """Compile .tile files to CUDA C++ (and optionally with nvcc)."""
    paths = {"-o": output, "--out-dir": out_dir, "--header": header, "-MF": depfile}
    paths |= {"--cubin": cubin, "--hsaco": hsaco, "--obj": obj, "--shared": shared}
    for flag, value in paths.items():
        if value == "":
            raise click.UsageError(f"{flag} needs a path, not an empty string")
    binaries = [(k, p) for k, p in (("cubin", cubin), ("hsaco", hsaco), ("obj", obj), ("shared", shared)) if p]
    jobs = plan_jobs(
        inputs, output, out_dir, header, headers, binaries, make_deps or bool(depfile), depfile, emit, check
    )
    if out_dir is not None and not check:
        make_out_dir(out_dir)
    no_cache = no_cache or bool(os.environ.get("TILEC_NO_CACHE"))
    warns = parse_warning_flags(warning_flags)
    nvcc_werror = werror or warns.werror
    parsed = parse_defines(defines)
    if tuned is not None:
        parsed = tuned_defines(tuned, inputs, parsed, arch)
        jobs = [dataclass_replace(job, tuned=tuned) for job in jobs]
    if includes and emit != "cuda":
        raise click.UsageError("--include needs --emit cuda")
    opts = BuildOptions(parsed, arch, emit, after, check, not no_cache, nvcc_werror, phony, warns, includes)
    outcomes = driver.build_many(
        [job.source for job in jobs],
        opts.defines,
        opts.arch,
        opts.emit,
        cache=opts.cache,
        after=opts.after,
        bounds=verify_bounds,
    )
    codes = [finish_job(job, outcome, opts) for job, outcome in zip(jobs, outcomes, strict=True)]
    if show_time:
        print_times()
    raise SystemExit(worst(codes))


def tuned_defines(path: str, inputs: Sequence[str], defines: dict[str, str], arch: str) -> dict[str, str]:
    """--tuned: the tune file's choice for this build under the command line's -D."""
    from tilec.tune import tunefile

    if len(inputs) != 1:
        raise click.UsageError("--tuned applies to one input (its tune file names it)")
    try:
        t = tunefile.read(path)
        tunefile.check_applies(t, path, inputs[0], arch)
    except Exception as exc:  # noqa: BLE001
        raise SystemExit(report_exception(exc, inputs[0])) from None
    return tunefile.choose(t, defines)


def plan_jobs(
    inputs: Sequence[str],
    output: str | None,
    out_dir: str | None,
    header: str | None,
    headers: bool,
    binaries: list[tuple[str, str]],
    make_deps: bool,
    depfile: str | None,
    emit: str,
    check: bool,
) -> list[Job]:
    if len(binaries) > 1:
        raise click.UsageError("give at most one of --cubin, --hsaco, --obj, --shared")
    if binaries and emit != "cuda":
        raise click.UsageError(f"--{binaries[0][0]} needs --emit cuda")
    if (header or headers) and emit != "cuda":
        raise click.UsageError("--header/--headers need --emit cuda")
    if out_dir is None:
        return [_single_job(inputs, output, header, headers, binaries, make_deps, depfile, check)]
    if output or header or depfile or binaries:
        raise click.UsageError(
            "--out-dir writes DIR/NAME.cu per input; -o, --header, -MF and --cubin/--obj/--shared "
            "need a single input without --out-dir"
        )
    ext = {"cuda": ".cu", "tir": ".tir", "thread": ".thread"}[emit]
    jobs: list[Job] = []
    seen: dict[str, str] = {}
    for src in inputs:
        stem = os.path.splitext(os.path.basename(src))[0]
        if stem in seen:
            raise click.UsageError(f"{src} and {seen[stem]} would both write {stem}{ext} in {out_dir}")
        seen[stem] = src
        base = os.path.join(out_dir, stem)
        jobs.append(Job(src, base + ext, base + ".h" if headers else None, base + ".d" if make_deps else None))
    return jobs


def make_out_dir(out_dir: str) -> None:
    """--out-dir names a directory for tilec to fill: it is created if missing
    (single-file outputs such as -o need an existing directory, as with gcc)."""
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise SystemExit(report_exception(OSError(exc.errno, exc.strerror, out_dir), out_dir)) from None


def _single_job(inputs, output, header, headers, binaries, make_deps, depfile, check) -> Job:
    if len(inputs) != 1:
        raise click.UsageError("several inputs need --out-dir DIR")
    if headers:
        raise click.UsageError("--headers goes with --out-dir; use --header OUT.h for one input")
    if check and not output:
        raise click.UsageError("--check needs -o OUT (the file to compare with)")
    binary = binaries[0] if binaries else None
    if make_deps and not depfile:
        target = output or (binary[1] if binary else None)
        if target is None:
            raise click.UsageError("-MD needs -o OUT (the depfile is OUT.d) or -MF FILE.d")
        depfile = os.path.splitext(target)[0] + ".d"
    return Job(inputs[0], output, header, depfile, binary)


def finish_job(job: Job, outcome: driver.Result | Exception, opts: BuildOptions) -> int:
    """Check or write one job's outputs; a failure (the build's or the writing's) is reported."""
    try:
        if isinstance(outcome, Exception):
            raise outcome
        result = driver.with_includes(outcome, opts.includes, job.cu)
        report_warnings(result.warnings, opts.warnings)
        if opts.check:
            return check_output(job, result.text)
        write_job(job, result, opts)
        return OK
    except Exception as exc:  # noqa: BLE001 - every failure becomes a report and an exit code
        if not opts.check:
            for path in job.outputs():
                driver.remove_output(path)
        return report_exception(exc, job.source)


def report_warnings(warnings: Sequence[Diagnostic], options: WarningOptions) -> None:
    """Print the warnings `options` keep; raise them as a CompileError when any is an error (-Werror)."""
    from tilec.diagnostics import CompileError, render_all, with_options

    kept = with_options(warnings, options)
    if any(w.severity == "error" for w in kept):
        raise CompileError(kept)
    report(render_all(kept))


def write_job(job: Job, result: driver.Result, opts: BuildOptions) -> None:
    for path in job.outputs():  # every output can be written, or none is
        driver.check_output_path(path)
    if job.cu is None and job.binary is None:
        sys.stdout.write(result.text)
        sys.stdout.flush()
    elif job.cu is not None:
        driver.write_atomic(job.cu, result.text)
    if job.header:
        driver.write_atomic(job.header, driver.header_text(result.text, job.source, opts.arch))
    if job.binary:
        compile_binary(job, result.text, opts)
    if job.depfile:
        targets = [p for p in (job.cu, job.header, job.binary[1] if job.binary else None) if p]
        files = [*result.files, *([job.tuned] if job.tuned else [])]
        driver.write_atomic(job.depfile, driver.depfile_text(targets, files, opts.phony))


def compile_binary(job: Job, text: str, opts: BuildOptions) -> None:
    from tilec import toolchain

    kind, out = job.binary  # type: ignore[misc]  # None-able field; the caller passes only jobs with a binary
    with timing.phase("nvcc"):
        if job.cu is not None:
            warnings = toolchain.run_nvcc(kind, job.cu, out, opts.arch, opts.werror)
        else:  # a temporary source: its --include paths are the command line's, from here
            here = ["-I", os.getcwd()] if opts.includes else []
            with tempfile.TemporaryDirectory(prefix="tilec-") as tmp:
                suffix = toolchain.target_of(opts.arch).compiler.source_suffix
                cu = os.path.join(tmp, os.path.splitext(os.path.basename(job.source))[0] + suffix)
                driver.write_atomic(cu, text)
                warnings = toolchain.run_nvcc(kind, cu, out, opts.arch, opts.werror, here)
    report(warnings)


def check_output(job: Job, text: str) -> int:
    """--check: 0 when the file on disk equals `text`, else 1 and a unified diff on stdout."""
    assert job.cu is not None
    try:
        with open(job.cu, encoding="utf-8", newline="") as f:
            old = f.read()
    except FileNotFoundError:
        report(f"error: {job.cu} does not exist (tilec build {job.source} -o {job.cu} writes it)")
        return USER_ERROR
    if old == text:
        return OK
    import difflib

    diff = difflib.unified_diff(
        old.splitlines(keepends=True),
        text.splitlines(keepends=True),
        f"{job.cu} (on disk)",
        f"{job.cu} (from {job.source})",
    )
    sys.stdout.writelines(diff)
    sys.stdout.flush()
    report(f"error: {job.cu} is out of date with {job.source} (rebuild it with tilec build)")
    return USER_ERROR


def print_times() -> None:
    """--time: start-up (interpreter, click, the CLI module) then each phase."""
    rows = [("start-up", _STARTUP)] if _STARTUP is not None else []
    rows += list(timing.TIMES.items())
    rows.append(("total", (_STARTUP or 0.0) + time.perf_counter() - _MAIN_START))
    text = "".join(f"  {name:<20} {secs * 1000:8.1f} ms\n" for name, secs in rows)
    sys.stderr.write("tilec: time per phase\n" + text)


def _seconds_since_process_start() -> float | None:
    """From /proc (Linux, 10 ms resolution); None elsewhere."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


_MAIN_START = time.perf_counter()
_STARTUP: float | None = None


# ---------------------------------------------------------------- check


@cli.command()
@click.argument("inputs", nargs=-1, required=True, metavar="FILE.tile...")
@arch_option
@define_option
def check(inputs: tuple[str, ...], arch: str, defines: tuple[str, ...]) -> None:
    """Parse and check .tile files without generating code."""
    parsed = parse_defines(defines)
    codes = []
    for path in inputs:
        try:
            driver.check_file(path, parsed, arch)
            codes.append(OK)
        except Exception as exc:  # noqa: BLE001
            codes.append(report_exception(exc, path))
    raise SystemExit(worst(codes))


# ---------------------------------------------------------------- explain


@cli.command()
@click.argument("source", metavar="FILE.tile")
@click.option("--kernel", metavar="NAME", help="Only this kernel (default: every kernel of the file).")
@arch_option
@define_option
@click.option("--svg", metavar="OUT.svg", help="Also draw a fragment's thread-to-element map (needs --buffer).")
@click.option("--buffer", metavar="NAME", help="The fragment --svg draws.")
@click.option(
    "--color-by", type=click.Choice(["warp", "thread"]), default="warp", show_default=True, help="SVG cell colours."
)
def explain(
    source: str,
    kernel: str | None,
    arch: str,
    defines: tuple[str, ...],
    svg: str | None,
    buffer: str | None,
    color_by: str,
) -> None:
    """Show the inferred layouts, chosen instructions and pipeline plan of each kernel."""
    if bool(svg) != bool(buffer):
        raise click.UsageError("--svg and --buffer go together (--svg OUT.svg --buffer NAME)")
    parsed = parse_defines(defines)
    try:
        program = driver.elaborate(source, parsed, arch)
        from tilec import explain as ex

        try:
            reports = ex.explain_program(program, arch, kernel)
        except KeyError:
            names = ", ".join(k.name for k in program.kernels)
            raise click.UsageError(f"no kernel '{kernel}' in {source} (kernels: {names})") from None
        if svg and buffer:
            try:
                picture = ex.explain_svg(program, buffer, kernel, color_by)
            except ValueError as exc:
                raise click.UsageError(str(exc)) from None
            driver.write_atomic(svg, picture)
    except click.ClickException:
        raise
    except Exception as exc:  # noqa: BLE001
        raise SystemExit(report_exception(exc, source)) from None
    show_reports(reports, ex)
    if svg:
        report(f"wrote {svg}")
    raise SystemExit(OK)


def show_reports(reports, ex) -> None:
    """Plain text when stdout is not a terminal (pipes, docs, goldens); rich tables when it is."""
    if not (sys.stdout.isatty() and os.environ.get("NO_COLOR") is None):
        sys.stdout.write(ex.render_text(reports))
        sys.stdout.flush()
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    for r in reports:
        console.rule(f"[bold]{r.heading}")
        for t in r.tables:
            if not t.columns:
                console.print(f"[bold]{t.title}[/bold]: {t.caption}")
                continue
            table = Table(title=t.title, caption=t.caption or None, title_justify="left", caption_justify="left")
            for c in t.columns:
                table.add_column(c, overflow="fold")
            for row in t.rows:
                table.add_row(*row)
            console.print(table)
        console.print("[bold]Totals")
        for n in r.notes:
            console.print(f"  {n}")


# ---------------------------------------------------------------- tune


@cli.command()
@click.argument("source", metavar="FILE.tile")
@click.option("--shape", "shapes", multiple=True, required=True, metavar="M=8192,N=8192", help="A problem shape.")
@arch_option
@define_option
@click.option("-o", "--output", metavar="FILE.tune.json", help="Write the choice per shape (tilec build --tuned).")
@click.option("--explain", is_flag=True, help="Every configuration: the ranked ones and why each pruned one is.")
@click.option("--measure", is_flag=True, help="Time the best on every visible GPU (else: the model alone).")
@click.option("--gpu", type=click.Choice(["a100", "h200"]), help="The GPU to model (default: the arch's).")
@click.option("--top", default=4, show_default=True, help="With --measure, how many of the best to compile and time.")
@click.option(
    "--band",
    default=0.15,  # search.BAND (not imported here: the CLI loads the compiler lazily)
    show_default=True,
    help="With --measure, also time every point the model puts within this fraction of its best.",
)
@click.option("-j", "--jobs", default=1, show_default=True, help="Processes compiling them (0: one per core).")
def tune(
    source: str,
    shapes: tuple[str, ...],
    arch: str,
    defines: tuple[str, ...],
    output: str | None,
    explain: bool,
    measure: bool,
    gpu: str | None,
    top: int,
    band: float,
    jobs: int,
) -> None:
    """Recommend the tile configuration of a kernel file's candidate sets for shapes."""
    from tilec.tune import command, search

    jobs = jobs or search.default_jobs()
    defs = parse_defines(defines)
    opts = command.Options(source, shapes, defs, arch, gpu, output, explain, measure, top, jobs, band)
    try:
        command.run(opts)
    except BrokenPipeError:
        raise  # `tilec tune ... | head`: main() exits quietly
    except Exception as exc:  # noqa: BLE001
        raise SystemExit(report_exception(exc, source)) from None
    raise SystemExit(OK)


# ---------------------------------------------------------------- import-tilelang


@cli.command("import-tilelang")
@click.argument("source", metavar="PROG.py")
@click.option("-o", "--output", metavar="OUT.tile", help="Output file; stdout if omitted.")
@click.option("--function", metavar="NAME", help="Convert only this kernel function (default: every one).")
@click.option("--source-commit", metavar="COMMIT", help="The commit the source was read at (for the header).")
@define_option
def import_tilelang(
    source: str, output: str | None, function: str | None, source_commit: str | None, defines: tuple[str, ...]
) -> None:
    """Convert a TileLang Python program to a .tile file (docs/import-tilelang.md)."""
    parsed = parse_defines(defines)
    try:
        from tilec.import_tilelang import convert, read_source

        text = convert(read_source(source), source, function, source_commit, parsed)
        if output:
            driver.write_atomic(output, text)
        else:
            sys.stdout.write(text)
    except Exception as exc:  # noqa: BLE001
        driver.remove_output(output)  # no stale .tile left behind, as for build
        raise SystemExit(report_exception(exc, source)) from None
    raise SystemExit(OK)


# ---------------------------------------------------------------- entry


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry: click's usage errors are user errors (exit 1), not 2."""
    global _MAIN_START, _STARTUP
    _MAIN_START, _STARTUP = time.perf_counter(), _seconds_since_process_start()
    try:
        code = cli.main(args=list(argv) if argv is not None else None, prog_name="tilec", standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.exceptions.ClickException as exc:
        exc.show()
        code = USER_ERROR
    except click.exceptions.Abort:
        sys.stderr.write("aborted\n")
        code = USER_ERROR
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else USER_ERROR
    except BrokenPipeError:
        code = OK
    sys.exit(code or 0)
