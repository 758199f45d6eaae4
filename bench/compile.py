"""Compile speed: `check` + `build` of a generated 1,000-stage corpus vs naive `sympy.simplify`.

    .venv/bin/python bench/compile.py [--pipelines 100] [--stages 10] [--simplify-sample 50]
        [--chains 30,60] [--families 64x12,64x16]

Prints one table; the naive simplify column is measured on a sample of the same formulas in the
same run and extrapolated to the whole corpus (it takes ~16 ms a formula). Then `check` of
inheritance chains (`dslc.bombs.inheritance_chain_source`: each pipeline extends the one before
and adds a let and a stage), with the prover's work: obligations settled afresh, all pipelines.
Then the command lines `dslc check` and `dslc build` of families (`dslc.bombs.family_source`: one
large pipeline and children that each add a let and replace a stage), each in a fresh process as
a user runs them: CPU seconds and peak RSS of the child, medians.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dslc.bombs import family_source, inheritance_chain_source
from dslc.child_usage import run_dslc
from dslc.compiler import compile_sources
from dslc.emit import artifact, dumps
from dslc.source import SourceFile

ITERATIONS = [
    "steps",
    "steps - 1",
    "len(schedule)",
    "blocks * 4",
    "blocks * steps",
    "ceil(steps / 2)",
    "if cfg then steps else steps // 2",
    "max(1, steps - 2)",
]
MEASURES = [
    "tokens",
    "tokens * (if cfg then 2 else 1)",
    "latent_frames * height * width",
    "tokens + text_tokens",
    "(height // 8) * (width // 8)",
    "tokens * 3 / 2",
    "frames * height * width",
    "tokens ** 2 / 4096 + tokens",
]


def pipeline_text(index: int, stages: int, rng: random.Random) -> str:
    lines = [
        f"pipeline generated_{index} {{",
        "    param steps: int = 40 in [1, 1000]",
        "    param frames: int = 81 in [1, 1021] where frames % 4 == 1",
        "    param height: int = 720 in [16, 4096] where height % 16 == 0",
        "    param width: int = 1280 in [16, 4096] where width % 16 == 0",
        "    param cfg: bool = true",
        "    param text_tokens: int = 512 in [1, 4096]",
        "    let latent_frames = (frames - 1) // 4 + 1",
        "    let tokens = latent_frames * (height // 16) * (width // 16)",
        "    let blocks = (latent_frames + 7) // 8",
        "    let schedule = [1000, 750, 500, 250]",
    ]
    for stage in range(stages):
        lines.append(
            f"    stage Stage{stage} {{ iterations = {rng.choice(ITERATIONS)}; "
            f"memory ~ {rng.choice(MEASURES)}; time ~ {rng.choice(MEASURES)} }}"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def naive_simplify_seconds(texts: list[str], sample: int, rng: random.Random) -> tuple[float, int]:
    """Median seconds of `sympy.simplify` on one stage formula with lets inlined by hand."""
    import sympy

    steps, frames, height, width, text_tokens = sympy.symbols(
        "steps frames height width text_tokens", integer=True, positive=True
    )
    cfg = sympy.Symbol("cfg")
    latent = sympy.floor((frames - 1) / 4) + 1
    tokens = latent * sympy.floor(height / 16) * sympy.floor(width / 16)
    blocks = sympy.floor((latent + 7) / 8)
    guided = sympy.Piecewise((2, sympy.Eq(cfg, True)), (1, True))
    formulas = {
        "steps": steps,
        "steps - 1": steps - 1,
        "len(schedule)": sympy.Integer(4),
        "blocks * 4": blocks * 4,
        "blocks * steps": blocks * steps,
        "ceil(steps / 2)": sympy.ceiling(steps / 2),
        "if cfg then steps else steps // 2": sympy.Piecewise(
            (steps, sympy.Eq(cfg, True)), (sympy.floor(steps / 2), True)
        ),
        "max(1, steps - 2)": sympy.Max(1, steps - 2),
        "tokens": tokens,
        "tokens * (if cfg then 2 else 1)": tokens * guided,
        "latent_frames * height * width": latent * height * width,
        "tokens + text_tokens": tokens + text_tokens,
        "(height // 8) * (width // 8)": sympy.floor(height / 8) * sympy.floor(width / 8),
        "tokens * 3 / 2": tokens * 3 / 2,
        "frames * height * width": frames * height * width,
        "tokens ** 2 / 4096 + tokens": tokens**2 / 4096 + tokens,
    }
    chosen = [rng.choice(list(formulas.values())) for _ in range(sample)]
    times = []
    for formula in chosen:
        start = time.perf_counter()
        sympy.simplify(formula)
        times.append(time.perf_counter() - start)
    return statistics.median(times), len(chosen)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pipelines", type=int, default=100)
    parser.add_argument("--stages", type=int, default=10)
    parser.add_argument("--simplify-sample", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--chains", default="30,60", help="inheritance chain sizes ('' for none)")
    parser.add_argument(
        "--families", default="64x12,64x16", help="STAGESxCHILDREN families ('' for none)"
    )
    parser.add_argument("--only-families", action="store_true", help="skip the corpus and chains")
    args = parser.parse_args()
    if args.only_families:
        families(args.families, args.repeat)
        return
    rng = random.Random(0)
    texts = [pipeline_text(i, args.stages, rng) for i in range(args.pipelines)]
    sources = [SourceFile(f"generated_{i}.wf", text) for i, text in enumerate(texts)]
    formulas = args.pipelines * args.stages * 3
    compile_sources(sources[:1])  # warm the parser and imports, as a long-lived process would be

    check_times, build_times = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        result = compile_sources(sources)
        checked = time.perf_counter()
        assert result.ok, [d.message for d in result.diagnostics][:5]
        assert result.program is not None
        text = dumps(artifact(result.program))
        built = time.perf_counter()
        check_times.append(checked - start)
        build_times.append(built - start)
    warnings = sum(not d.is_error for d in result.diagnostics)
    per_formula, sampled = naive_simplify_seconds(texts, args.simplify_sample, rng)
    naive_total = per_formula * formulas
    check, build = statistics.median(check_times), statistics.median(build_times)

    print(
        f"machine: {platform.processor() or platform.machine()}, "
        f"{platform.python_implementation()} "
        f"{platform.python_version()}; corpus: {args.pipelines} pipelines, "
        f"{args.pipelines * args.stages} "
        f"stages, {formulas} formulas; artifact {len(text) / 1e6:.1f} MB; {warnings} warnings"
    )
    print(f"{'what':<42} {'seconds':>10} {'per formula':>13} {'vs build':>10}")
    rows = [
        ("dslc check (parse, resolve, types, prove)", check),
        ("dslc build (check + emit JSON)", build),
        (f"naive sympy.simplify (median of {sampled}, x{formulas})", naive_total),
    ]
    for name, seconds in rows:
        print(
            f"{name:<42} {seconds:>10.3f} {seconds / formulas * 1e3:>10.3f} ms "
            f"{seconds / build:>9.1f}x"
        )
    print(f"goal: build <= 2 s: {'met' if build <= 2.0 else 'MISSED'}")
    if args.chains:
        chains([int(n) for n in args.chains.split(",")], args.repeat)
    if args.families:
        families(args.families, args.repeat)


def families(sizes: str, repeat: int) -> None:
    """`dslc check` and `dslc build` of families, each command in a fresh process."""
    print(f"{'family':<8} {'source':>8} {'command':<7} {'exit':>4} {'CPU s':>7} {'RSS MiB':>8}")
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes.split(","):
            stages, children = (int(n) for n in size.split("x"))
            path = Path(folder) / f"family_{size}.wf"
            path.write_text(family_source(stages, children))
            for command in (["check", str(path)], ["build", str(path), "-o", f"{path}.json"]):
                runs = [run_dslc(command) for _ in range(repeat)]
                code = runs[0].code
                cpu = statistics.median(r.cpu_s for r in runs)
                rss = max(r.peak_mib for r in runs)
                kb = path.stat().st_size / 1000
                print(f"{size:<8} {kb:>5.1f} KB {command[0]:<7} {code:>4} {cpu:>7.3f} {rss:>8.1f}")


def chains(sizes: list[int], repeat: int) -> None:
    """`check` of inheritance chains: median wall and CPU seconds, and the prover's fresh work."""
    from dslc.passes.prove import ProofCache, check_properties

    print(f"{'chain':<8} {'check s':>9} {'CPU s':>9} {'per pipeline':>14} {'proofs':>8}")
    for n in sizes:
        source = SourceFile(f"chain_{n}.wf", inheritance_chain_source(n))
        walls, cpus = [], []
        for _ in range(repeat):
            start, cpu = time.perf_counter(), time.process_time()
            result = compile_sources([source])
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
            assert result.ok
        assert result.program is not None
        proofs = ProofCache()
        for pipeline in result.program.pipelines:
            check_properties(pipeline, proofs=proofs)
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        print(f"{n:<8} {wall:>9.3f} {cpu:>9.3f} {wall / n * 1e3:>11.2f} ms {proofs.misses:>8}")


if __name__ == "__main__":
    main()
