"""Mutation fuzzing of calibration documents and of `dslc calibrate` / `dslc plan` option lists
(shared by bench/fuzz.py and tests/calibration/test_fuzz_cli.py).

One contract: the command, run through the `dslc` group as a person runs it, ends with exit 0, 1, 2,
4 or 5 -- never 3 (our bug), never an exception escaping it -- within ``CASE_SECONDS`` of CPU time
(``dslc.fuzzing.harness.CaseClock``). A document is mutated as JSON (a key dropped, a value of
another type or size, a list grown, names changed) or as text (a key repeated, bytes cut or flipped,
nesting); an option list by dropping, repeating, swapping options or giving one a hostile value (a
huge or negative number, a malformed shape, a FIFO, `/dev/zero`, a link to `/dev/null`, a folder,
an unknown figure format).

A calibration takes seconds, so option lists name a factory that stops the run where the pipeline
would be built (``STOP_FACTORY``, ``stop`` below): everything before it -- parsing, the formulas,
the shapes, the output checks, the `call` values -- is what the fuzzer reaches. Every mutator
takes a ``random.Random``: a case is reproducible from its seed.
"""

from __future__ import annotations

import copy
import json
import os
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeAlias

from artifact.write import JsonValue
from dslc.fuzzing.harness import CaseClock

__all__ = [
    "CASE_SECONDS",
    "DOCUMENT_MUTATORS",
    "OK_EXITS",
    "SIZE_MUTATORS",
    "Failure",
    "Sandbox",
    "calibrate_options",
    "mutate_document",
    "mutate_options",
    "plan_options",
    "run_dslc",
    "stop",
]

CASE_SECONDS = 1.0  # a case using more CPU time than this is a failure
OK_EXITS = frozenset({0, 1, 2, 4, 5})  # 3 is an internal error: a bug of ours
#: A parsed JSON value, mutated in place; a place in one (keys and indexes from the root).
Json: TypeAlias = JsonValue
Place: TypeAlias = "tuple[str | int, ...]"


STOP_FACTORY = "calibration.fuzzing.mutate:stop"


def stop(seed: int) -> object:
    """A ``--pipeline`` factory that ends the run where the pipeline would be built (exit 1)."""
    raise SystemExit(f"fuzz: stopped where the pipeline is built (seed {seed})")


class Failure(Exception):
    """A case broke the contract: exit 3, an escaping exception, or too slow."""

    def __init__(self, kind: str, mutation: str, problem: str, payload: object) -> None:
        super().__init__(f"{kind} [{mutation}]: {problem}")
        self.kind, self.mutation, self.problem, self.payload = kind, mutation, problem, payload


# --------------------------------------------------------------------------- running a case


def run_dslc(
    args: Sequence[str], kind: str, mutation: str, seconds: float | None = CASE_SECONDS
) -> float:
    """`dslc ARGS` in this process (click's runner); the seconds taken, or ``Failure``.

    An option list that no longer names a pipeline or a calibration gets ``--pipeline`` the
    stopping factory (else it would calibrate the default example for real, for seconds)."""
    from click.testing import CliRunner

    from dslc.cli import cli

    args = list(args)
    if "--pipeline" not in args and "--calibration" not in args:
        args += ["--pipeline", STOP_FACTORY]
    clock = CaseClock()
    result = CliRunner().invoke(cli, list(args))
    escaped = result.exception is not None and not isinstance(result.exception, SystemExit)
    if escaped or result.exit_code not in OK_EXITS:
        what = f"{type(result.exception).__name__}: {result.exception}" if escaped else ""
        last = (result.output.strip().splitlines() or [""])[-1][:300]
        raise Failure(kind, mutation, f"exit {result.exit_code} {what} {last}".strip(), args)
    if (overrun := clock.overrun(seconds)) is not None:
        raise Failure(kind, mutation, overrun, args)
    return clock.elapsed()[0]


class Sandbox:
    """A folder of hostile paths the option mutators hand out: a FIFO, a link to /dev/null, a
    folder, a file under a file, a document that is not JSON."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        fifo = root / "fifo.json"
        if not fifo.exists():
            os.mkfifo(fifo)
        null = root / "null.png"
        if not null.is_symlink():
            null.symlink_to("/dev/null")
        (root / "folder").mkdir(exist_ok=True)
        (root / "file").write_text("x")
        (root / "broken.json").write_text('{"version": 1, "version": 1}')

    def hostile_paths(self) -> list[str]:
        r = self.root
        return [
            str(r / "fifo.json"),
            str(r / "null.png"),
            str(r / "folder"),
            str(r / "file" / "under.json"),
            str(r / "broken.json"),
            str(r / "missing" / "deep" / "out.json"),
            "/dev/zero",
            "/dev/null",
            str(r / "out.xyz"),
            str(r / "figure"),
            "",
        ]


# --------------------------------------------------------------------------- documents


HOSTILE_VALUES: tuple[Json, ...] = (
    None,
    True,
    -1,
    0,
    1.5,
    2**64 + 1,
    10**4000,
    "transformer",
    "",
    [],
    {},
    ["nope"],
    {"a": 1},
    "x" * 5000,
)


def _paths(doc: Json, at: Place = ()) -> list[Place]:
    """Every place in the document (iteratively: a mutated one may be deep)."""
    out: list[Place] = []
    stack: list[tuple[Json, Place]] = [(doc, at)]
    while stack:
        value, here = stack.pop()
        out.append(here)
        if isinstance(value, dict):
            stack.extend((v, (*here, k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (*here, i)) for i, v in enumerate(value))
    return out


def _get(doc: Json, path: Place) -> Json:
    """The value at a place `_paths` found."""
    for key in path:
        if isinstance(doc, dict) and isinstance(key, str):  # noqa: SIM114 - each narrows its own
            doc = doc[key]
        elif isinstance(doc, list) and isinstance(key, int):
            doc = doc[key]
        else:
            raise KeyError(path)  # not a place in this document
    return doc


def _set(doc: Json, path: Place, value: Json) -> Json:
    if not path:
        return value
    parent, key = _get(doc, path[:-1]), path[-1]
    if isinstance(parent, dict) and isinstance(key, str):  # noqa: SIM114 - each narrows its own
        parent[key] = value
    elif isinstance(parent, list) and isinstance(key, int):
        parent[key] = value
    return doc


def _replace_value(rng: random.Random, doc: Json) -> Json:
    return _set(doc, rng.choice(_paths(doc)), copy.deepcopy(rng.choice(HOSTILE_VALUES)))


def _drop_key(rng: random.Random, doc: Json) -> Json:
    places = [p for p in _paths(doc) if p and isinstance(_get(doc, p[:-1]), dict)]
    if places:
        place = rng.choice(places)
        parent, key = _get(doc, place[:-1]), place[-1]
        if isinstance(parent, dict) and isinstance(key, str):  # always: `places` holds only these
            del parent[key]
    return doc


def _grow_list(rng: random.Random, doc: Json) -> Json:
    lists = [p for p in _paths(doc) if isinstance(_get(doc, p), list) and _get(doc, p)]
    if lists:
        items = _get(doc, rng.choice(lists))
        if isinstance(items, list):  # always: `lists` holds only lists
            items.extend(copy.deepcopy(items) * rng.choice([1, 3, 20]))
    return doc


def _rename(rng: random.Random, doc: Json) -> Json:
    """A component renamed in one place only (weights, a phase, a layer use; a plan's entry)."""
    weights = doc.get("component_weight_bytes") if isinstance(doc, dict) else None
    placed = doc.get("components") if isinstance(doc, dict) else None
    names = list(weights) if isinstance(weights, dict) else []
    if not names and isinstance(placed, list):  # a saved plan: its components' names
        found = [c.get("name") for c in placed if isinstance(c, dict)]
        names = [n for n in found if isinstance(n, str)]
    if names:
        old, new = rng.choice(names), rng.choice(["ghost", "", "x" * 300, "transformer\x00"])
        text = json.dumps(doc).replace(json.dumps(old), json.dumps(new), 1)
        return json.loads(text)
    return doc


def _many_components(rng: random.Random, doc: Json) -> Json:
    """Many components in one phase: the planner's size, within its limits or refused by them."""
    phases = doc.get("phases") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or not isinstance(phases, list) or not phases:
        return doc
    count = rng.choice([10, 50, 200])
    weights = doc.setdefault("component_weight_bytes", {})
    if not isinstance(weights, dict):
        return doc
    names = [f"c{i}" for i in range(count)]
    weights.update({n: rng.randrange(1, 1 << 30) for n in names})
    phase = phases[0]
    if isinstance(phase, dict):
        phase["active_components"] = [*names]
    return doc


def _version(rng: random.Random, doc: Json) -> Json:
    if isinstance(doc, dict):
        doc["version"] = rng.choice([0, 2, "1", 1.0, None, True, 10**100])
    return doc


DOCUMENT_MUTATORS: dict[str, Callable[[random.Random, Json], Json]] = {
    "replace-value": _replace_value,
    "drop-key": _drop_key,
    "grow-list": _grow_list,
    "rename-component": _rename,
    "many-components": _many_components,
    "version": _version,
}


def _text_mutation(rng: random.Random, text: str) -> tuple[str, str]:
    """A mutation of the bytes: a key repeated, the text cut, a byte flipped, nesting, digits."""
    choice = rng.randrange(6)
    if choice == 0:
        return "repeat-key", text.replace("{", '{"version": 1, "version": 1, ', 1)
    if choice == 1:
        return "truncate", text[: rng.randrange(len(text) + 1)]
    if choice == 2:
        at = rng.randrange(len(text))
        return "flip-byte", text[:at] + chr(rng.randrange(0, 0x800)) + text[at + 1 :]
    if choice == 3:
        depth = rng.choice([100, 1000, 100_000])
        return "nest", text.replace("[", "[" * depth, 1).replace("]", "]" * depth, 1)
    if choice == 4:
        return "digits", text.replace(": 1", ": " + "9" * rng.choice([300, 4301, 5000]), 1)
    return "nan", text.replace(": 0", ": NaN", 1)


#: What grows the planner's problem (many components, longer lists): the planner's own bounds
#: (issue 23's cost half) decide how fast those end; the CI test leaves them to bench/fuzz.py.
SIZE_MUTATORS = frozenset({"grow-list", "many-components"})


def mutate_document(
    rng: random.Random, doc: Mapping[str, Json], *, sizes: bool = True
) -> tuple[str, str]:
    """One mutation of a calibration document: its name and the document's text."""
    if rng.random() < 0.3:
        return _text_mutation(rng, json.dumps(doc))
    names = []
    mutated: Json = copy.deepcopy(dict(doc))
    chosen = sorted(n for n in DOCUMENT_MUTATORS if sizes or n not in SIZE_MUTATORS)
    for _ in range(rng.choice([1, 1, 2, 3])):
        name = rng.choice(chosen)
        names.append(name)
        mutated = DOCUMENT_MUTATORS[name](rng, mutated)
    return "+".join(names), json.dumps(mutated)


# --------------------------------------------------------------------------- option lists


HOSTILE_OPTION_VALUES = (
    "",
    "-1",
    "0",
    "1e309",
    "nan",
    "inf",
    "9" * 5000,
    "steps=" + "9" * 5000,
    "steps=-1",
    "steps=1,steps=2",
    "height=10**360",
    "nope=1",
    "=",
    ",,,",
    "steps=true",
    "cfg=2",
    "steps=1.5",
    "x" * 10_000,
    "\udcff",
    "80PiB",
    "0B",
    "1e400GB",
    "cuda:99",
)


def calibrate_options(
    sandbox: Sandbox, formulas: str, stop_factory: str = STOP_FACTORY
) -> list[str]:
    """A `dslc calibrate` option list that would run (stopped where the pipeline is built)."""
    r = sandbox.root
    return [
        "calibrate",
        *("--pipeline", stop_factory, "--name", "custom_sd", "--formulas", formulas),
        *("--probe", "steps=1,height=32,width=32", "--target", "steps=2,height=64,width=64"),
        *("--warmup", "steps=1,height=16,width=16", "--margin", "1.2", "--repeat", "1"),
        *("--seed", "0", "--threads", "1", "--clock", "cpu", "--device", "cpu"),
        *("--time-tolerance", "0.1", "--json", "--strict", "--verify"),
        *("--save", str(r / "cal.json"), "--plot", str(r / "p.png")),
        *("--records", str(r / "records.json")),
    ]


def plan_options(
    sandbox: Sandbox, document: str | None, formulas: str, stop_factory: str = STOP_FACTORY
) -> list[str]:
    """A `dslc plan` option list: from a saved calibration, or (``document`` None) running one."""
    device = ["--device-memory", "24GiB", "--reserve", "1GiB", "--bandwidth", "25GB/s"]
    device += ["--pin-budget", "64GiB", "--json"]
    if document is not None:
        return ["plan", "--calibration", document, *device]
    run = ["--pipeline", stop_factory, "--name", "custom_sd", "--formulas", formulas]
    run += ["--probe", "steps=1,height=32,width=32", "--target", "steps=2,height=64,width=64"]
    return ["plan", *run, *device]


_OPTIONS = (
    "--calibration",
    "--pipeline",
    "--example",
    "--name",
    "--formulas",
    "--probe",
    "--target",
    "--warmup",
    "--margin",
    "--repeat",
    "--seed",
    "--threads",
    "--clock",
    "--device",
    "--time-tolerance",
    "--save",
    "--plot",
    "--records",
    "--device-memory",
    "--reserve",
    "--bandwidth",
    "--pin-budget",
    "--device-capacity",
    "--calibrate-offload",
)


def mutate_options(
    rng: random.Random, options: Sequence[str], sandbox: Sandbox
) -> tuple[str, list[str]]:
    """One to three mutations of an option list (its first item, the command, stays)."""
    args = list(options)
    names = []
    paths = sandbox.hostile_paths()
    values = [*HOSTILE_OPTION_VALUES, *paths, "plan", "plan:", *(f"plan:{p}" for p in paths)]
    for _ in range(rng.choice([1, 1, 2, 3])):
        choice = rng.randrange(6)
        at = rng.randrange(1, len(args)) if len(args) > 1 else 1
        if choice == 0 and len(args) > 1:
            names.append("drop")
            del args[at]
        elif choice == 1 and len(args) > 1:
            names.append("repeat")
            args.insert(at, args[at])
        elif choice == 2 and len(args) > 2:
            names.append("swap")
            other = rng.randrange(1, len(args))
            args[at], args[other] = args[other], args[at]
        elif choice == 3 and len(args) > 1:
            names.append("hostile-value")
            values_at = [i for i, a in enumerate(args) if i > 0 and not a.startswith("--")]
            args[rng.choice(values_at) if values_at else at] = rng.choice(values)
        elif choice == 4:
            names.append("add-option")
            args.insert(at, rng.choice(values))
            args.insert(at, rng.choice(_OPTIONS))
        else:
            names.append("help")
            args.append(rng.choice(["--help", "--no-such-option", "--json", "--verify"]))
    return "+".join(names), args
