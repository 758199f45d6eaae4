"""Cost bombs: tiny inputs that once took seconds or gigabytes, one generator per family.

Each family builds a `.wf` source and/or an artifact document of a given size, so tests can show
both sides refuse the large ones with a `limit` diagnostic or an `ArtifactLimitError` (and load
the small ones), and `bench/fuzz.py` can draw random sizes. Plain text and JSON only: nothing here
imports the compiler or the runtime.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from artifact.write import JsonObject, JsonValue

__all__ = ["ARTIFACT_BOMBS", "SOURCE_BOMBS", "artifact_bomb", "source_bomb"]

_SPAN: JsonObject = {"source": 0, "line": 1, "column": 1, "end_line": 1, "end_column": 2}
_ONE: JsonObject = {"k": "int", "v": 1}


# --------------------------------------------------------------------------- sources


def nested_powers_source(depth: int) -> str:
    """`(((x ** 64) ** 64) ** 64)...`: each exponent within the limit, their product not."""
    expr = "x"
    for _ in range(depth):
        expr = f"({expr}) ** 64"
    return (
        "pipeline p {\n    param x: int = 3 in [0, 1000]\n"
        f"    let y = {expr}\n    stage S {{ iterations = x; memory ~ y }}\n}}\n"
    )


def squaring_chain_source(length: int) -> str:
    """`let a1 = a0 * a0`, `let a2 = a1 * a1`, ...: no `**` at all, doubling bits per let."""
    lets = "".join(f"    let a{i} = a{i - 1} * a{i - 1}\n" for i in range(1, length + 1))
    return (
        "pipeline p {\n    param x: int = 3 in [0, 1000]\n    let a0 = 3\n"
        f"{lets}    stage S {{ iterations = x; memory ~ a{length} }}\n}}\n"
    )


def let_fan_out_source(args: int, stages: int) -> str:
    """One wide `max` let used by many stages: once re-emitted in every stage's function."""
    items = ", ".join(f"x + {i}" for i in range(args))
    body = "".join(
        f"    stage S{i} {{ iterations = x; memory ~ m; time ~ m }}\n" for i in range(stages)
    )
    return f"pipeline p {{\n    param x: int = 3 in [0, 1000]\n    let m = max({items})\n{body}}}\n"


def contract_fan_out_source(params: int) -> str:
    """Many params, each with a contract: once every contract's closure took every param."""
    decls = "".join(
        f"    param x{i}: int = 2 in [0, 100] where x{i} % 2 == 0\n" for i in range(params)
    )
    return f"pipeline p {{\n{decls}    stage S {{ iterations = x0 }}\n}}\n"


def extends_chain_source(children: int, stages: int) -> str:
    """Many pipelines extending one large one: once every child re-proved every stage."""
    body = "".join(
        f"    stage S{i} {{ iterations = steps * {i + 1} // 2; memory ~ height * width + {i} }}\n"
        for i in range(stages)
    )
    base = (
        "pipeline base {\n    param steps: int = 40 in [1, 1000]\n"
        "    param height: int = 720 in [16, 4096] where height % 16 == 0\n"
        "    param width: int = 1280 in [16, 4096] where width % 16 == 0\n"
        f"{body}}}\n"
    )
    kids = "".join(
        f"pipeline c{i} extends base {{ param steps = {i % 50 + 1} }}\n" for i in range(children)
    )
    return base + kids


def inheritance_chain_source(n: int) -> str:
    """`n` pipelines, each extending the one before and adding a let and a stage that reads it:
    checking it once re-proved every inherited member (a new let changed every proof's key)."""
    head = (
        "pipeline p0 {\n    param steps: int = 40 in [1, 1000]\n"
        "    param frames: int = 81 in [1, 1021] where frames % 4 == 1\n"
        "    param height: int = 720 in [16, 4096] where height % 16 == 0\n"
        "    param width: int = 1280 in [16, 4096] where width % 16 == 0\n"
        "    let latent = (frames - 1) // 4 + 1\n"
        "    stage S0 { iterations = steps; memory ~ latent * height * width }\n}\n"
    )
    kids = "".join(
        f"pipeline p{i} extends p{i - 1} {{\n    let l{i} = latent * (height // 16) + {i}\n"
        f"    stage S{i} {{ iterations = steps * {i} // 2; memory ~ l{i} * width / {i} }}\n}}\n"
        for i in range(1, n)
    )
    return head + kids


def family_source(stages: int, children: int) -> str:
    """A large pipeline and children that each add a let and replace one stage (issue 23: at 64
    stages and 16 children, 40 KB that took 2.5 s to check and 6.5 s to build, each child
    re-checking and re-emitting every stage it inherits)."""
    body = "".join(
        f"    stage S{i} uses m{i}.forward {{\n"
        f"        iterations = steps * cfg + {i}\n"
        f"        memory ~ latent * height * width / 64 + tokens * {i + 1} + frames * {i} "
        f"+ max(height, width) * latent * {i + 13} + tokens * cfg * {i + 17} "
        f"+ (frames // 4) * height * {i + 19} + width * steps * {i + 23} "
        f"+ latent * cfg * steps * {i + 29} + (height // 16) * (width // 16) * {i + 37}\n"
        f"        time ~ latent * tokens * steps + {i} + height * width * {i + 3} "
        f"+ max(latent, {i}) * tokens + latent * latent * {i + 5} + tokens * frames * {i + 7} "
        f"+ (height // 8) * (width // 8) * latent * {i + 11} + frames * width * {i + 31} "
        f"+ tokens * cfg * steps * {i + 41}\n    }}\n"
        for i in range(stages)
    )
    base = (
        "pipeline base {\n    param steps: int = 40 in [1, 1000]\n"
        "    param frames: int = 81 in [1, 1021] where frames % 4 == 1\n"
        "    param height: int = 720 in [16, 4096] where height % 16 == 0\n"
        "    param width: int = 1280 in [16, 4096] where width % 16 == 0\n"
        "    param cfg: int = 2 in [1, 2]\n"
        "    call num_inference_steps = steps\n    call num_frames = frames\n"
        "    call height = height\n    call width = width\n"
        "    let latent = (frames - 1) // 4 + 1\n"
        "    let tokens = latent * (height // 16) * (width // 16)\n"
        f"{body}}}\n"
    )
    kids = "".join(
        f"pipeline c{c} extends base {{\n    let k{c} = tokens * {c + 1}\n"
        f"    stage S{c % stages} uses m{c % stages}.forward {{\n"
        f"        iterations = steps + {c}\n"
        f"        memory ~ k{c} * height + latent * width * {c + 2}\n"
        f"        time ~ k{c} * steps\n    }}\n}}\n"
        for c in range(children)
    )
    return base + kids


def flattened_nodes_source(children: int, items: int) -> str:
    """A base with a long `sum` that every child inherits: small text, many flattened nodes."""
    terms = ", ".join(["x"] * items)
    base = (
        "pipeline base {\n    param x: int = 1 in [0, 10]\n"
        f"    stage S {{ iterations = x; memory ~ sum([{terms}]) }}\n}}\n"
    )
    return base + "".join(f"pipeline c{i} extends base {{}}\n" for i in range(children))


def blank_flood_source(lines: int) -> str:
    """A valid pipeline followed by a flood of blank lines."""
    return "pipeline p {\n    stage S { iterations = 1 }\n}\n" + "\n" * lines


SOURCE_BOMBS: dict[str, Callable[[random.Random], str]] = {
    "nested-powers": lambda rng: nested_powers_source(rng.randint(1, 8)),
    "squaring-chain": lambda rng: squaring_chain_source(rng.randint(4, 40)),
    "let-fan-out": lambda rng: let_fan_out_source(rng.choice([10, 300, 1500]), rng.randint(1, 64)),
    "contract-fan-out": lambda rng: contract_fan_out_source(rng.choice([10, 300, 600])),
    "extends-chain": lambda rng: extends_chain_source(rng.choice([1, 10, 30]), rng.randint(1, 60)),
    # (800 children, over the node limit, take seconds to refuse: tests/dslc/passes/test_cost.py)
    "flattened-nodes": lambda rng: flattened_nodes_source(rng.choice([10, 60]), 150),
    "family": lambda rng: family_source(rng.choice([1, 16, 64]), rng.choice([0, 4, 16])),
    "blank-flood": lambda rng: blank_flood_source(rng.choice([100, 16_000, 900_000])),
}


def source_bomb(rng: random.Random) -> tuple[str, str]:
    """A random family at a random size: (family, source text)."""
    name = rng.choice(list(SOURCE_BOMBS))
    return name, SOURCE_BOMBS[name](rng)


# --------------------------------------------------------------------------- artifacts


def _param(name: str, default: int = 3, hi: int | None = 1000) -> JsonObject:
    return {"name": name, "type": "int", "default": default, "min": 0, "max": hi, "span": _SPAN}


def _stage(name: str, memory: JsonObject = _ONE, time: JsonObject = _ONE) -> JsonObject:
    return {
        "name": name,
        "span": _SPAN,
        "iterations": {"expr": {"k": "param", "name": "x"}, "span": _SPAN},
        "memory": {"expr": memory, "span": _SPAN},
        "time": {"expr": time, "span": _SPAN},
    }


def _pipeline(name: str, **parts: JsonValue) -> JsonObject:
    pipeline: JsonObject = {"name": name, "extends": None, "span": _SPAN, "params": [_param("x")]}
    pipeline.update({"contracts": [], "lets": [], "stages": [_stage("S")]})
    pipeline.update(parts)
    return pipeline


def document(*pipelines: JsonValue) -> JsonObject:
    """An artifact document around these pipelines."""
    return {
        "format": "workload-formulas",
        "format_version": 1,
        "compiler": {"name": "dslc", "version": "bombs"},
        "sources": [{"path": "bomb.wf", "sha256": "0" * 64}],
        "pipelines": list(pipelines),
    }


def _let(name: str, expr: JsonObject) -> JsonObject:
    return {"name": name, "expr": expr, "span": _SPAN}


def nested_powers_artifact(depth: int) -> JsonObject:
    expr: JsonObject = {"k": "param", "name": "x"}
    for _ in range(depth):
        expr = {"k": "pow", "args": [expr], "exp": 64}
    return document(_pipeline("p", stages=[_stage("S", memory=expr)]))


def squaring_chain_artifact(length: int) -> JsonObject:
    lets: list[JsonValue] = [_let("a0", {"k": "int", "v": 3})]
    for i in range(1, length + 1):
        prev: JsonObject = {"k": "let", "name": f"a{i - 1}"}
        lets.append(_let(f"a{i}", {"k": "mul", "args": [prev, prev]}))
    memory: JsonObject = {"k": "let", "name": f"a{length}"}
    return document(_pipeline("p", lets=lets, stages=[_stage("S", memory=memory)]))


def let_fan_out_artifact(args: int, stages: int) -> JsonObject:
    x: JsonObject = {"k": "param", "name": "x"}
    wide: JsonObject = {
        "k": "max",
        "args": [{"k": "add", "args": [x, {"k": "int", "v": i}]} for i in range(args)],
    }
    m: JsonObject = {"k": "let", "name": "m"}
    built: list[JsonValue] = [_stage(f"S{i}", memory=m, time=m) for i in range(stages)]
    return document(_pipeline("p", lets=[_let("m", wide)], stages=built))


def contract_fan_out_artifact(params: int) -> JsonObject:
    names = [f"x{i}" for i in range(params)]
    names[0] = "x"
    decls: list[JsonValue] = [_param(name, 2, 100) for name in names]
    contracts: list[JsonValue] = [
        {
            "param": name,
            "text": f"{name} % 2 == 0",
            "expr": {
                "k": "eq",
                "args": [
                    {"k": "mod", "args": [{"k": "param", "name": name}, {"k": "int", "v": 2}]},
                    {"k": "int", "v": 0},
                ],
            },
            "span": _SPAN,
        }
        for name in names
    ]
    return document(_pipeline("p", params=decls, contracts=contracts))


def many_pipelines_artifact(count: int) -> JsonObject:
    return document(*(_pipeline(f"p{i}") for i in range(count)))


def many_params_artifact(count: int) -> JsonObject:
    params: list[JsonValue] = [_param("x"), *(_param(f"y{i}") for i in range(count))]
    return document(_pipeline("p", params=params))


ARTIFACT_BOMBS: dict[str, Callable[[random.Random], JsonObject]] = {
    "nested-powers": lambda rng: nested_powers_artifact(rng.randint(1, 8)),
    "squaring-chain": lambda rng: squaring_chain_artifact(rng.randint(4, 40)),
    "let-fan-out": lambda rng: let_fan_out_artifact(
        rng.choice([10, 2000, 6000]), rng.randint(1, 100)
    ),
    "contract-fan-out": lambda rng: contract_fan_out_artifact(rng.choice([10, 300, 511, 2000])),
    "many-pipelines": lambda rng: many_pipelines_artifact(rng.choice([10, 300, 1001, 20_000])),
    "many-params": lambda rng: many_params_artifact(rng.choice([10, 511, 40_000])),
}


def artifact_bomb(rng: random.Random) -> tuple[str, JsonObject]:
    """A random family at a random size: (family, artifact document)."""
    name = rng.choice(list(ARTIFACT_BOMBS))
    return name, ARTIFACT_BOMBS[name](rng)
