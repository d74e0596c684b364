"""Build the corpus programs for the GPU table (bench/corpus_gpu.py), and copy TileLang's examples.

    PYTHONPATH=src python bench/corpus_prebuild.py --out .corpus [--only gemm,topk] [--nvcc]

Runs here, where tilec is installed (the GPU machine has only torch and nvcc). For every program of
tests/corpus/tilelang/ that builds for sm_90a (no `# expect-error` header line for it), and for every
tilec build its spec in bench/corpus_gpu.py names (-D overrides of problem-size params; the tile
configuration stays the file's), writes `<out>/<build>.cu` (`NAME.cu`, or `NAME--BUILD.cu` for the
extra builds) generated with `--arch sm_90a`. It also copies the TileLang example each program was
written from (its header's `# source: PATH @ COMMIT`) out of the bare git mirror into
`<out>/tilelang/PATH`, so that the GPU machine can import it. `<out>/manifest.json` lists per build
the program, the .cu file, the -D values and every param's value, the TileLang source, and the
error if it failed; per program, its builds. A failure does not stop the others; the exit status
is 1 if anything failed.

`<out>` must be git-ignored (`/.corpus/` is): TileLang's code is never committed here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "src"))

from corpus_gpu import MANIFEST, SPECS, build_id  # noqa: E402

CORPUS = os.path.join(ROOT, "tests", "corpus", "tilelang")
ARCH = "sm_90a"
MIRROR = "/work/.mirror/tile-ai+tilelang/repo"
SOURCE = re.compile(r"^# source: (examples/\S+\.py) @ ([0-9a-f]{40})$", re.M)
EXPECT = re.compile(r"^# expect-error(?:\((sm_\w+)\))?: (.+)$", re.M)
PARAM = re.compile(r"^param (\w+)\s*=\s*(.+?)(?:\s+in\s+\(.*\))?\s*(?:#.*)?$", re.M)


def corpus_programs() -> dict[str, str]:
    """{name: path} of every corpus program."""
    return {f[: -len(".tile")]: os.path.join(CORPUS, f) for f in sorted(os.listdir(CORPUS)) if f.endswith(".tile")}


def expected_error(text: str, arch: str = ARCH) -> str | None:
    """The header's expected error for `arch` (the program does not build there), else None."""
    for target, msg in EXPECT.findall(text):
        if target in ("", arch):
            return msg.strip()
    return None


def buildable() -> dict[str, str]:
    """{name: path} of the corpus programs that build for sm_90a."""
    out = {}
    for name, path in corpus_programs().items():
        with open(path, encoding="utf-8") as f:
            if expected_error(f.read()) is None:
                out[name] = path
    return out


def params_of(text: str, defines: dict[str, str]) -> dict[str, str]:
    """Every param's value as written (or as -D gives it)."""
    values = {k: v.strip() for k, v in PARAM.findall(text)}
    values.update(defines)
    return values


def generate(path: str, defines: dict[str, str]) -> tuple[str | None, str | None]:
    """(cuda text, error) as `tilec build --arch sm_90a -D ...` writes it."""
    from tilec import driver
    from tilec.diagnostics import CompileError, render_all

    rel = os.path.relpath(path, ROOT)
    cwd = os.getcwd()
    os.chdir(ROOT)  # diagnostics name the file relative to the checkout
    try:
        return driver.build(rel, dict(defines), ARCH, cache=False).text, None
    except CompileError as e:
        return None, render_all(e.diagnostics)
    except Exception as e:  # noqa: BLE001 - an internal error is reported per build
        import traceback

        return None, f"internal error: {type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}"
    finally:
        os.chdir(cwd)


def copy_source(mirror: str, source: str, commit: str, out: str) -> str | None:
    """Copy TileLang's `source` at `commit` (HEAD when the mirror lacks it) into out/tilelang/; the error."""
    dest = os.path.join(out, "tilelang", source)
    for rev in (commit, "HEAD"):
        proc = subprocess.run(
            ["git", f"--git-dir={mirror}", "show", f"{rev}:{source}"], capture_output=True, check=False
        )
        if proc.returncode == 0:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest + ".tmp", "wb") as f:
                f.write(proc.stdout)
            os.replace(dest + ".tmp", dest)
            return None
    return f"git show {commit}:{source} in {mirror}: {proc.stderr.decode(errors='replace').strip()[:500]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, ".corpus"), help="output folder (default .corpus, git-ignored)")
    ap.add_argument("--only", default="", help="comma-separated programs")
    ap.add_argument("--mirror", default=MIRROR, help="TileLang's bare git mirror ('' to copy nothing)")
    ap.add_argument("--nvcc", action="store_true", help="also compile every file with nvcc here (-arch sm_90a)")
    args = ap.parse_args(argv)

    only = {s for s in args.only.split(",") if s}
    programs = {n: p for n, p in buildable().items() if not only or n in only}
    os.makedirs(args.out, exist_ok=True)
    manifest_path = os.path.join(args.out, MANIFEST)
    manifest: dict = {"arch": ARCH, "builds": {}, "programs": {}, "not_built": {}}
    if only and os.path.exists(manifest_path):  # a partial rebuild keeps the other entries
        with open(manifest_path) as f:
            manifest = json.load(f)
    for name, path in corpus_programs().items():
        if name not in buildable():
            with open(path, encoding="utf-8") as f:
                manifest["not_built"][name] = expected_error(f.read())

    failed: list[str] = []
    for name, path in programs.items():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        m = SOURCE.match(text)
        source, commit = (m.group(1), m.group(2)) if m else ("", "")
        spec = SPECS.get(name)
        builds = spec.builds if spec else {"": {}}
        entry_prog = {
            "tile": os.path.relpath(path, ROOT),
            "source": source,
            "commit": commit,
            "tilelang_source": f"tilelang/{source}" if source else None,
            "spec": spec is not None,
            "builds": [build_id(name, b) for b in builds],
        }
        if spec is None:
            failed.append(name)
            entry_prog["error"] = "no spec in bench/corpus_gpu.py"
            print(f"ERR {name}: no spec in bench/corpus_gpu.py", flush=True)
        if args.mirror and source:
            err = copy_source(args.mirror, source, commit, args.out)
            if err:
                entry_prog["tilelang_error"] = err
                failed.append(name)
                print(f"ERR {name}: {err}", flush=True)
        manifest["programs"][name] = entry_prog
        for b, defines in builds.items():
            bid = build_id(name, b)
            cu = os.path.join(args.out, f"{bid}.cu")
            t0 = time.perf_counter()
            code, err = generate(path, defines)
            secs = time.perf_counter() - t0
            entry = {
                "program": name,
                "build": b,
                "cu": f"{bid}.cu",
                "defines": dict(defines),
                "params": params_of(text, defines),
                "arch": ARCH,
                "tilelang_source": entry_prog["tilelang_source"],
                "ok": err is None,
                "seconds": round(secs, 3),
            }
            if err is None:
                with open(cu + ".tmp", "w", encoding="utf-8") as f:
                    f.write(code)
                os.replace(cu + ".tmp", cu)
            else:
                entry["error"] = err
                failed.append(bid)
                if os.path.exists(cu):
                    os.unlink(cu)  # never leave a stale file to be run
            manifest["builds"][bid] = entry
            ds = " ".join(f"-D {k}={v}" for k, v in defines.items())
            print(f"{'ok ' if err is None else 'ERR'} {bid:40s} {secs:5.2f}s {ds}", flush=True)
            if err:
                print("    " + "\n    ".join(err.strip().splitlines()[:30]), flush=True)

    if args.nvcc:
        sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
        import concurrent.futures as cf

        from prebuild import nvcc_check

        built = [b for b, e in manifest["builds"].items() if e["ok"] and (not only or e["program"] in only)]
        with cf.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
            futs = {b: pool.submit(nvcc_check, os.path.join(args.out, manifest["builds"][b]["cu"])) for b in built}
            for b, fut in futs.items():
                ok, msg, resources = fut.result()
                manifest["builds"][b]["nvcc_ok"] = ok
                if ok:
                    manifest["builds"][b]["resources"] = resources
                    print(f"nvcc ok  {b:40s} {resources}", flush=True)
                else:
                    manifest["builds"][b]["nvcc_error"] = msg
                    failed.append(b)
                    print(f"NVCC-ERR {b}\n    " + msg.strip().replace("\n", "\n    ")[:3000], flush=True)

    with open(manifest_path + ".tmp", "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    os.replace(manifest_path + ".tmp", manifest_path)
    n = len(manifest["builds"])
    print(
        f"\n{n - len(set(failed) & set(manifest['builds']))}/{n} builds in {args.out}/ "
        f"({len(programs)} programs; not built, as their headers say: {', '.join(manifest['not_built'])})"
    )
    if failed:
        print("failed: " + ", ".join(sorted(set(failed))), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
