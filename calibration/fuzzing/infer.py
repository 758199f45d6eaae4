"""Fuzzing `dslc infer` (shared by bench/fuzz.py ``--kinds infer`` and
tests/calibration/cli/test_fuzz_infer.py): random skeletons, axes, bases, factories and options.

The contract is ``calibration.fuzzing.mutate``'s: exit 0, 1, 2, 4 or 5, never 3 or an escaping
exception. A case is one `dslc infer` command line: a skeleton file or ``--axis`` texts drawn from
a small grammar of params (ranges, contracts, `call` lines, probe groups), then mutated as text; a
``--base`` of declared, unknown or hostile values; one of the factories below; hostile options
(``--seed``, ``--timeout``, ``-o`` paths from the sandbox). Most cases stop where the pipeline
would be built; one in ``RUN_EVERY`` runs ``toy``, a pipeline of two small linear modules whose
call takes milliseconds, through the whole inference (discovery, ladder, fits, draft), its sizes
capped (``TOY_ROWS``, ``TOY_STEPS``) so that a hostile default costs no more than a tiny one.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence

from calibration.fuzzing.mutate import HOSTILE_OPTION_VALUES, STOP_FACTORY, Sandbox

__all__ = ["RUN_EVERY", "TOY_FACTORIES", "case_seconds", "infer_case", "toy"]

RUN_EVERY = 8  # one case in eight runs the toy pipeline through the whole inference
STOP_SECONDS = 2.0  # a case stopped where the pipeline is built: parsing and checks only
RUN_SECONDS = 90.0  # a case that runs the toy: the whole inference, up to 48 sizes and the fits
TOY_ROWS = 512  # the toy's latent rows at most (height / 8 x width / 8 x frames)
TOY_STEPS = 12  # the toy's denoising steps at most
#: The factories of this module a case may name (behaviours of the toy, and not-pipelines).
TOY_FACTORIES = ("toy", "toy_raising", "toy_exiting", "toy_empty", "not_a_pipeline")
#: A skeleton the toy drafts from (the warm-up of a long run, and the tests' unmutated case).
WARM_SKELETON = """pipeline toyp {
    param steps: int = 4 in [1, 1000]
    param height: int = 64 in [8, 4096] where height % 8 == 0
    param cfg: bool = true
    call num_inference_steps = steps
    call height = height
    call guidance_scale = if cfg then 4 else 1
    probe height
}
"""
_ARGS = ("num_inference_steps", "height", "width", "num_frames", "guidance_scale")


def _toy_class() -> type:
    import torch

    class Toy:
        """A pipeline of a linear "unet" run per step and a "vae" decoding once."""

        def __init__(self, seed: int, how: str) -> None:
            torch.manual_seed(seed % (1 << 63))
            self.components = {"unet": torch.nn.Linear(8, 8), "vae": torch.nn.Linear(8, 4)}
            self.how = how

        def __call__(
            self,
            num_inference_steps: int = 2,
            height: int = 16,
            width: int = 16,
            num_frames: int = 1,
            guidance_scale: float = 1.0,
            callback_on_step_end: object = None,
            generator: object = None,
            **kwargs: object,
        ) -> object:
            rows = max(1, int(height) // 8) * max(1, int(width) // 8) * max(1, int(num_frames))
            if self.how == "raise" and rows > 8:
                raise RuntimeError("the toy refuses more than 8 rows")
            if self.how == "exit":
                sys.exit(0)
            batch = 2 if float(guidance_scale) > 1 else 1
            latents = torch.ones(min(rows, TOY_ROWS) * batch, 8)
            for i in range(max(0, min(int(num_inference_steps), TOY_STEPS))):
                latents = self.components["unet"](latents)
                if callable(callback_on_step_end):
                    callback_on_step_end(self, i, i, {"latents": latents})
            return self.components["vae"](latents)

    return Toy


def toy(seed: int = 0) -> object:
    """The toy pipeline: milliseconds a call at any size."""
    return _toy_class()(seed, "")


def toy_raising(seed: int = 0) -> object:
    return _toy_class()(seed, "raise")


def toy_exiting(seed: int = 0) -> object:
    return _toy_class()(seed, "exit")


def toy_empty(seed: int = 0) -> object:
    pipe = _toy_class()(seed, "")
    pipe.components = {"scheduler": None}
    return pipe


def not_a_pipeline(seed: int = 0) -> object:
    return [seed]


# --------------------------------------------------------------------------- skeletons and axes


def _param(rng: random.Random, name: str) -> tuple[str, str]:
    """A param line and its axis text, with a range and a contract now and then."""
    if rng.random() < 0.2:
        value = rng.choice(["true", "false"])
        return f"param {name}: bool = {value}", f"{name}={value}"
    low = rng.choice([0, 1, 1, 8, 16, -5])
    default = low + rng.choice([0, 1, 7, 48, 496, 10**9, 10**25])
    high = default + rng.choice([0, 1, 1000, 10**12])
    where = ""
    if rng.random() < 0.4:
        k = rng.choice([2, 4, 8, 16, 10**6])
        where = f" where {name} % {k} == {default % k}"
    ranged = f" in [{low}, {high}]" if rng.random() < 0.85 else ""
    line = f"param {name}: int = {default}{ranged}{where}"
    return line, f"{name}={default}{ranged}{where}"


def skeleton_parts(rng: random.Random) -> tuple[list[str], list[str], list[str]]:
    """Param lines, their axis texts (with `-> ARG` and `probe`) and the `call`/`probe` lines."""
    names = rng.sample(["steps", "height", "width", "frames", "cfg", "x"], rng.randrange(0, 5))
    params, axes, calls, probed = [], [], [], []
    for name in names:
        line, axis = _param(rng, name)
        params.append(line)
        arg = rng.choice(_ARGS) if rng.random() < 0.8 else rng.choice(["prompt", "nope", "x y"])
        is_bool = ": bool" in line
        call = f"{arg} = if {name} then 4 else 1" if is_bool else f"{arg} = {name}"
        calls.append(f"call {call}")
        axis += f" -> {arg}=4 else 1" if is_bool else f" -> {arg}"
        if not is_bool and rng.random() < 0.4:
            probed.append(name)
            axis += " probe"
        axes.append(axis)
    extra = [f"probe {', '.join(probed)}"] if probed else []
    return params, axes, [*calls, *extra]


def _mutate_text(rng: random.Random, text: str) -> tuple[str, str]:
    """A text mutation of a skeleton: a line dropped or repeated, junk, digits, a stage."""
    lines = text.split("\n")
    choice = rng.randrange(8)
    at = rng.randrange(len(lines))
    if choice == 0:
        del lines[at]
        return "drop-line", "\n".join(lines)
    if choice == 1:
        lines.insert(at, lines[at])
        return "repeat-line", "\n".join(lines)
    if choice == 2:
        junk = rng.choice(["}", "{", "\u0663", "9" * 40, "stage S uses unet {}", "pipeline q {"])
        lines.insert(at, junk)
        return "junk-line", "\n".join(lines)
    if choice == 3:
        return "digits", text.replace("= 1", "= " + "9" * rng.choice([29, 31, 400]), 1)
    if choice == 4:
        return "comment-brace", text.rstrip("\n") + "  # }\n"
    if choice == 5:
        return "one-line", " ".join(line.strip() for line in lines)
    if choice == 6:
        return "cut", text[: rng.randrange(len(text) + 1)]
    return "none", text


def skeleton_text(rng: random.Random, mutate: float = 0.5) -> tuple[str, str]:
    """A skeleton of random params and facts, mutated as text with probability ``mutate``."""
    params, _, facts = skeleton_parts(rng)
    body = [*(f"    {line}" for line in [*params, *facts])]
    text = "\n".join(["pipeline fuzzed {", *body, "}"]) + "\n"
    if rng.random() < mutate:
        return _mutate_text(rng, text)
    return "none", text


# --------------------------------------------------------------------------- a whole case


def _base(rng: random.Random) -> list[str]:
    names = ["steps", "height", "width", "frames", "cfg", "x", "nope"]
    values = ["1", "2", "16", "0", "-1", "true", str(10**9), "9" * 31, "1.5", ""]
    parts = [f"{rng.choice(names)}={rng.choice(values)}" for _ in range(rng.randrange(1, 4))]
    return ["--base", ",".join(parts)]


def _options(rng: random.Random, sandbox: Sandbox) -> list[str]:
    paths = sandbox.hostile_paths()
    pool = [
        ["--seed", rng.choice(["0", "-1", str(2**64), str(10**23), "x"])],
        ["--timeout", rng.choice(["0.001", "1", "nan", "inf", "-1", "1e9", "3600"])],
        ["-o", rng.choice([*paths, str(sandbox.root / "draft.wf")])],
        ["--json"],
        ["--strict"],
        ["--name", rng.choice(["p", "", "x y", "pipeline", "a" * 100])],
        [
            rng.choice(["--seed", "--base", "--axis", "--timeout"]),
            rng.choice(HOSTILE_OPTION_VALUES),
        ],
    ]
    return [item for part in rng.sample(pool, rng.randrange(0, 3)) for item in part]


def infer_case(rng: random.Random, index: int, sandbox: Sandbox) -> tuple[str, list[str]]:
    """Case ``index``: its mutation's name and the `dslc infer` arguments (a file written in the
    sandbox for a skeleton). A case that runs the toy is mutated less: most reach the fits."""
    runs = index % RUN_EVERY == RUN_EVERY - 1
    factory = f"calibration.fuzzing.infer:{rng.choice(TOY_FACTORIES)}" if runs else STOP_FACTORY
    names = [f"factory:{factory.rsplit(':', 1)[-1]}"]
    args = ["infer", "--pipeline", factory]
    if rng.random() < 0.6:
        mutation, text = skeleton_text(rng, mutate=0.2 if runs else 0.5)
        path = sandbox.root / f"skeleton{index % 4}.wf"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        args += ["--params", str(path)]
        names.append(f"skeleton:{mutation}")
    else:
        _, axes, _ = skeleton_parts(rng)
        args += [f"--axis={a}" for a in axes]
        names.append(f"axes:{len(axes)}")
    if rng.random() < (0.3 if runs else 0.6):
        args += _base(rng)
        names.append("base")
    options = _options(rng, sandbox) if not runs or rng.random() < 0.3 else []
    if runs and "--timeout" not in options:
        options += ["--timeout", "5"]
    return "+".join(names), [*args, *options]


def case_seconds(args: Sequence[str]) -> float:
    """How long a case may take: a stopped one ``STOP_SECONDS``, one running the toy more."""
    return STOP_SECONDS if STOP_FACTORY in args else RUN_SECONDS
