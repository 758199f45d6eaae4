"""Seeded formula mistakes: the measuring stick that calibration is never silent on a wrong formula.

Each ``Mistake`` is one exact edit of a real formula file (a built-in example's, or the test SD
pipeline's), the shapes to calibrate it at (a target at least 4x the probe in work) and what a
correct verdict must name. ``calibrate_mistake`` runs the real calibration on the edited formulas
(compiled in memory); ``evaluate`` is pure: which stages miss at the target (memory +-5 % raw, or a
bound under the measured peak; time beyond +-5 % and its two sigma, for mistakes about time, on the
stages the mistake touches -- other stages' time misses are kept as ``noise``, not counted), which
findings are actionable, and whether every missing stage is named by one -- or the calibration
refused to run with an error naming the bad fact. A request that failed makes every stage miss.
``bench/mistakes.py`` runs the suite; ``tests/calibration/examples/test_mistakes.py`` asserts each
mistake is caught.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from attrs import field, frozen

if TYPE_CHECKING:
    from calibration.run import Calibration
    from runtime import Pipeline

Params = Mapping[str, int | bool]

ROOT = Path(__file__).resolve().parents[2]
#: A stage misses when its raw prediction is off the measured peak (or time) by more than this.
MISS = 0.05
#: The test SD pipeline (not a built-in example): its factory, by file.
CUSTOM_SD_FACTORY = "tests/calibration/custom_pipeline.py:build"


def _params(value: Params) -> Params:
    return MappingProxyType(dict(value))


@frozen
class Edit:
    """Replace ``old`` (which must occur exactly once in the file) by ``new``."""

    old: str
    new: str


@frozen
class Mistake:
    """One seeded mistake: where, the edit, the shapes and what a correct verdict names."""

    name: str
    kind: str  # the category: "wrong compression factor", "missing term", ...
    family: str  # a built-in example's name, or "custom_sd"
    formula_file: str  # relative to the repository root
    pipeline: str
    edits: tuple[Edit, ...]
    warmup: Params = field(converter=_params, hash=False)
    probe: Params = field(converter=_params, hash=False)
    target: Params = field(converter=_params, hash=False)
    stages: tuple[str, ...]  # the stages a correct verdict names
    direction: str | None  # the param (or probe axis) the finding should name, where one applies
    why: str
    quantities: tuple[str, ...] = ("memory",)  # what the mistake gets wrong
    refusal: str | None = None  # a refusal must name this (a fact checked before any run)
    repeat: int = 1  # rounds: more where time is judged (its spread shrinks with repeats)
    slow: bool = False


@frozen
class Miss:
    """One stage's phase (or time) off at the target."""

    stage: str
    quantity: str  # "memory" or "time"
    label: str
    predicted: float | None
    bound: float | None
    measured: float | None
    why: str  # "raw +6.7 %", "bound under the measured peak", "not measured", "request failed"


@frozen
class Named:
    """One finding as the suite sees it."""

    kind: str
    stage: str
    quantity: str
    direction: str | None
    actionable: bool


@frozen
class Outcome:
    """What the calibration said about one mistake, and whether that catches it."""

    mistake: str
    family: str
    misses: tuple[Miss, ...]
    findings: tuple[Named, ...]
    refused: str | None  # the CalibrationError's message, when it refused to run
    errors: tuple[str, ...]  # failed requests
    facts: tuple[str, ...] = ()  # a refusal names one of these to catch the mistake
    noise: tuple[Miss, ...] = ()  # time misses of stages the mistake leaves alone: not counted
    direction: str | None = None  # the param a correct finding names

    @property
    def names_direction(self) -> bool:
        """A refusal, no direction to name, or an actionable finding that names it."""
        if self.refused is not None or self.direction is None:
            return True
        return any(f.actionable and self.direction in (f.direction or "") for f in self.findings)

    @property
    def missing(self) -> tuple[str, ...]:
        """The stages that miss, in order."""
        return tuple(dict.fromkeys(m.stage for m in self.misses))

    @property
    def named(self) -> tuple[str, ...]:
        """The stages some actionable finding names."""
        return tuple(dict.fromkeys(f.stage for f in self.findings if f.actionable))

    @property
    def harmless(self) -> bool:
        """Nothing misses and nothing failed: the mistake did not matter at these shapes."""
        return self.refused is None and not self.misses

    @property
    def caught(self) -> bool:
        """Refused naming the bad fact, or every missing stage named by an actionable finding."""
        if self.refused is not None:
            return any(fact in self.refused for fact in self.facts)
        return all(stage in self.named for stage in self.missing)


# --- the suite ------------------------------------------------------------------------------------

_SD = "tests/calibration/data/custom_sd.wf"
#: The tutorial's command: --probe steps=2,height=32,width=32 --target steps=6,height=64,width=64.
_SD_WARMUP: Params = {"steps": 2, "height": 16, "width": 16}
_SD_PROBE: Params = {"steps": 2, "height": 32, "width": 32}
_SD_TARGET: Params = {"steps": 6, "height": 64, "width": 64}
_SD_HISTORY = (
    Edit(
        "memory ~ [latent_pixels * batch, max(min(steps - 1, 4), 2) * latent_pixels]  # + ets",
        "memory ~ latent_pixels * batch",
    ),
    Edit(
        "memory ~ [height * width, min(max(steps, 2), 4) * latent_pixels]  # + ets still held",
        "memory ~ height * width",
    ),
)

MISTAKES: tuple[Mistake, ...] = (
    Mistake(
        "sd-no-history-term",
        "missing term",
        "custom_sd",
        _SD,
        "custom_sd",
        _SD_HISTORY,
        stages=("DenoisingStage",),
        direction="steps",
        why="the tutorial's my_sd.wf: no PNDM history term (the latents the scheduler keeps grow "
        "with steps); the tutorial's own command",
        warmup=_SD_WARMUP,
        probe=_SD_PROBE,
        target=_SD_TARGET,
    ),
    Mistake(
        "sd-steps-minus-one",
        "wrong iteration count",
        "custom_sd",
        _SD,
        "custom_sd",
        (
            Edit(
                "iterations = if steps > 1 then steps + 1 else 1  # PNDM (PLMS): one UNet call "
                "more",
                "iterations = if steps > 1 then steps - 1 else 1",
            ),
        ),
        stages=("DenoisingStage",),
        direction="steps",
        why="PNDM runs the UNet steps + 1 times; the formula says steps - 1 (a sampler's count)",
        quantities=("time",),
        repeat=2,
        slow=True,
        warmup=_SD_WARMUP,
        probe=_SD_PROBE,
        target=_SD_TARGET,
    ),
    Mistake(
        "wan-vae-temporal-8x",
        "wrong compression factor",
        "wan",
        "formulas/wan.wf",
        "wan2_1_t2v_1_3b",
        (
            Edit(
                "let latent_frames = (frames - 1) // 4 + 1  # VAE 4x temporal\n"
                "    let tokens = latent_frames * (height // 16) * (width // 16)",
                "let latent_frames = (frames - 1) // 8 + 1  # VAE 4x temporal\n"
                "    let tokens = latent_frames * (height // 16) * (width // 16)",
            ),
        ),
        warmup={"steps": 2, "frames": 9, "height": 32, "width": 32},
        probe={"steps": 2, "frames": 9, "height": 48, "width": 48},
        target={"steps": 4, "frames": 49, "height": 48, "width": 48},
        stages=("DenoisingStage", "DecodingStage"),
        direction="frames",
        why="another VAE's temporal factor (8x where Wan's compresses 4x)",
        slow=True,
    ),
    Mistake(
        "sdxl-no-cfg-batch",
        "missing CFG doubling",
        "sdxl",
        "formulas/sdxl.wf",
        "sdxl_base",
        (
            Edit(
                "memory ~ latent_pixels * batch  # UNet activations of one batched call",
                "memory ~ latent_pixels  # UNet activations of one batched call",
            ),
        ),
        warmup={"steps": 2, "height": 32, "width": 32, "cfg": False},
        probe={"steps": 2, "height": 64, "width": 64, "cfg": False},
        target={"steps": 4, "height": 128, "width": 128, "cfg": True},
        stages=("DenoisingStage",),
        direction="cfg",
        why="cond + uncond are batched into one UNet call: the formula leaves out the doubling, "
        "and the probe runs without CFG",
    ),
    Mistake(
        "wan-time-no-cfg",
        "missing CFG doubling",
        "wan",
        "formulas/wan.wf",
        "wan2_1_t2v_1_3b",
        (
            Edit(
                "memory ~ tokens  # activations of one transformer pass over the latent tokens\n"
                "        time ~ tokens * (if cfg then 2 else 1)",
                "memory ~ tokens  # activations of one transformer pass over the latent tokens\n"
                "        time ~ tokens",
            ),
        ),
        warmup={"steps": 2, "frames": 9, "height": 32, "width": 32, "cfg": False},
        probe={"steps": 2, "frames": 9, "height": 48, "width": 48, "cfg": False},
        target={"steps": 6, "frames": 9, "height": 64, "width": 64, "cfg": True},
        stages=("DenoisingStage",),
        direction="cfg",
        why="Wan runs cond and uncond one after the other: the formula's time leaves out the "
        "second pass, and the probe runs without CFG",
        quantities=("time",),
        repeat=3,
    ),
    Mistake(
        "flux-decode-constant",
        "constant where the stage grows",
        "flux",
        "formulas/flux.wf",
        "flux1_dev",
        (
            Edit(
                "memory ~ height * width  # decoded pixels (one image)",
                "memory ~ 1  # decoded pixels (one image)",
            ),
        ),
        warmup={"steps": 2, "height": 32, "width": 32},
        probe={"steps": 2, "height": 64, "width": 64},
        target={"steps": 4, "height": 128, "width": 128},
        stages=("DecodingStage",),
        direction="height*width",
        why="the decoder's working set grows with the image; the formula says constant",
    ),
    Mistake(
        "pixart-denoise-constant",
        "constant where the stage grows",
        "pixart",
        "formulas/pixart_sigma.wf",
        "pixart_sigma_1024",
        (
            Edit(
                "memory ~ tokens * batch  # activations of one batched transformer call",
                "memory ~ batch  # activations of one batched transformer call",
            ),
        ),
        warmup={"steps": 2, "height": 32, "width": 32},
        probe={"steps": 2, "height": 64, "width": 64},
        target={"steps": 4, "height": 128, "width": 128},
        stages=("DenoisingStage",),
        direction="height*width",
        why="the transformer's activations grow with the tokens; the formula says constant",
    ),
    Mistake(
        "flux-call-num-frames",
        "wrong call argument",
        "flux",
        "formulas/flux.wf",
        "flux1_dev",
        (Edit("    call width = width\n", "    call width = width\n    call num_frames = 1\n"),),
        warmup={"steps": 2, "height": 32, "width": 32},
        probe={"steps": 2, "height": 64, "width": 64},
        target={"steps": 4, "height": 128, "width": 128},
        stages=("TextEncodingStage", "DenoisingStage", "DecodingStage"),
        direction=None,
        why="num_frames on an image pipeline: FluxPipeline.__call__ does not take it",
        refusal="num_frames",
    ),
    Mistake(
        "sdxl-decode-uses-encode",
        "stage mapped to the wrong component",
        "sdxl",
        "formulas/sdxl.wf",
        "sdxl_base",
        (Edit("stage DecodingStage uses vae.decode {", "stage DecodingStage uses vae.encode {"),),
        warmup={"steps": 2, "height": 32, "width": 32},
        probe={"steps": 2, "height": 64, "width": 64},
        target={"steps": 4, "height": 128, "width": 128},
        stages=("DecodingStage",),
        direction=None,
        why="a text-to-image pipeline never encodes: the stage's window never opens",
    ),
    Mistake(
        "cogvideox-probe-minimum-9",
        "wrong probe minimum",
        "cogvideox",
        "formulas/cogvideox.wf",
        "cogvideox_2b",
        (Edit("probe frames >= 17  # the decoder", "probe frames >= 9  # the decoder"),),
        warmup={"steps": 2, "frames": 1, "height": 32, "width": 32},
        probe={"steps": 2, "frames": 1, "height": 32, "width": 32},
        target={"steps": 4, "frames": 41, "height": 48, "width": 48},
        stages=("DecodingStage",),
        direction="frames",
        why="CogVideoX's decoder is steady from 17 frames; a minimum of 9 lets the probes sit "
        "below its regime (the shapes ask for frames=1, raised to the declared minimum)",
        slow=True,
    ),
    Mistake(
        "wan-decode-no-output-term",
        "missing term",
        "wan",
        "formulas/wan.wf",
        "wan2_1_t2v_1_3b",
        (
            Edit(
                "num_inference_steps=50 (restated; same as the parent)\n}",
                "num_inference_steps=50 (restated; same as the parent)\n"
                "    stage DecodingStage { memory ~ height * width }\n}",
            ),
        ),
        warmup={"steps": 2, "frames": 9, "height": 16, "width": 16},
        probe={"steps": 2, "frames": 9, "height": 32, "width": 32},
        target={"steps": 4, "frames": 33, "height": 32, "width": 32},
        stages=("DecodingStage",),
        direction="frames",
        why="the decoded video grows with the frames; the formula keeps only the chunk working set",
    ),
    Mistake(
        "flux-denoise-grows-with-steps",
        "a term the stage does not have",
        "flux",
        "formulas/flux.wf",
        "flux1_dev",
        (
            Edit(
                "memory ~ tokens  # one transformer pass over the image tokens",
                "memory ~ tokens * steps  # one transformer pass over the image tokens",
            ),
        ),
        warmup={"steps": 2, "height": 32, "width": 32},
        probe={"steps": 2, "height": 64, "width": 64},
        target={"steps": 8, "height": 128, "width": 128},
        stages=("DenoisingStage",),
        direction="steps",
        why="activations are freed after each step; the formula has them grow with the steps",
    ),
)

BY_NAME: Mapping[str, Mistake] = MappingProxyType({m.name: m for m in MISTAKES})


# --- the edited formulas --------------------------------------------------------------------------


def edited_text(mistake: Mistake, root: Path = ROOT) -> str:
    """The formula file with the mistake's edits; each ``old`` must occur exactly once."""
    text = (root / mistake.formula_file).read_text()
    for edit in mistake.edits:
        count = text.count(edit.old)
        if count != 1:
            raise ValueError(
                f"{mistake.name}: {edit.old!r} occurs {count} times in {mistake.formula_file}"
            )
        text = text.replace(edit.old, edit.new)
    return text


def compile_mistake(mistake: Mistake, root: Path = ROOT) -> Pipeline:
    """The edited formulas compiled in memory (they must pass `dslc check`) and loaded."""
    from dslc.build import NotCompiled, load_text

    try:
        book = load_text(edited_text(mistake, root), f"{mistake.name}.wf")
    except NotCompiled as exc:
        raise ValueError(f"{mistake.name}: the edited {mistake.formula_file} {exc}") from None
    return book[mistake.pipeline]


def factory(family: str) -> tuple[Callable[[int], Any], Callable[[int], Mapping[str, object]]]:
    """The family's pipeline factory and its constant call arguments."""
    if family == "custom_sd":
        from calibration.cli.factory import load_factory

        found = load_factory(str(ROOT / CUSTOM_SD_FACTORY))
        assert found.call_kwargs is not None
        return found.build, found.call_kwargs
    from calibration.examples import EXAMPLES

    example = EXAMPLES[family]
    return example.build, example.call_kwargs


def calibrate_mistake(
    mistake: Mistake, *, repeat: int | None = None, threads: int | None = 1
) -> Calibration | str:
    """The real calibration of the edited formulas with ``verify``; a refusal's message instead of
    a Calibration when it raises ``CalibrationError``."""
    from calibration.errors import CalibrationError
    from calibration.probes.time_probe import TIME_TOLERANCE
    from calibration.run import calibrate_pipeline

    pipeline = compile_mistake(mistake)
    build, call_kwargs = factory(mistake.family)
    try:
        return calibrate_pipeline(
            build,
            pipeline,
            (mistake.warmup, mistake.probe, mistake.target),
            call_kwargs=call_kwargs,
            verify=True,
            repeat=repeat or mistake.repeat,
            threads=threads,
            label=mistake.name,
            formula_path=mistake.formula_file,
            time_tolerance=TIME_TOLERANCE if "time" in mistake.quantities else None,
        )
    except CalibrationError as exc:
        return str(exc)


# --- the evaluation -------------------------------------------------------------------------------


def _memory_misses(calibration: Calibration) -> list[Miss]:
    out = []
    measured_stages = set()
    for phase, shown in zip(calibration.estimate.phases, calibration.phases(), strict=True):
        if phase.stage is None or shown.measured is None:
            continue
        measured_stages.add(phase.stage)
        why = []
        error = shown.error
        if error is not None and abs(error) > MISS:
            why.append(f"raw {error * 100:+.1f} %")
        if shown.bound is not None and shown.bound < shown.measured:
            why.append("bound under the measured peak")
        if why:
            out.append(
                Miss(
                    phase.stage,
                    "memory",
                    shown.label,
                    shown.predicted,
                    shown.bound,
                    shown.measured,
                    ", ".join(why),
                )
            )
    return out


def _time_misses(calibration: Calibration) -> list[Miss]:
    """Stages whose time misses by more than ``MISS`` and more than the estimate's two sigma."""
    out = []
    estimated = calibration.estimate.timing.stages
    for shown, stage in zip(calibration.stage_times(), estimated, strict=True):
        if shown.predicted is None or shown.measured is None or shown.error is None:
            continue
        two_sigma = 2e3 * (stage.spread_s or 0.0)
        if abs(shown.error) > MISS and abs(shown.predicted - shown.measured) > two_sigma:
            out.append(
                Miss(
                    stage.stage,
                    "time",
                    f"time:{stage.stage}",
                    shown.predicted,
                    None,
                    shown.measured,
                    f"raw {shown.error * 100:+.1f} % (two sigma {two_sigma:.3g} ms)",
                )
            )
    return out


def evaluate(mistake: Mistake, result: Calibration | str, stages: tuple[str, ...]) -> Outcome:
    """The outcome of one calibration (or refusal) of ``mistake``; ``stages``: the pipeline's."""
    facts = (mistake.refusal,) if mistake.refusal else mistake.stages
    if isinstance(result, str):
        return Outcome(
            mistake.name, mistake.family, (), (), result, (), facts, (), mistake.direction
        )
    misses: list[Miss] = []
    noise: tuple[Miss, ...] = ()
    run = result.measured
    if run is None or not run.ok or result.errors:
        misses = [Miss(s, "request", s, None, None, None, "request failed") for s in stages]
    else:
        if "memory" in mistake.quantities:
            misses += _memory_misses(result)
        if "time" in mistake.quantities:
            timed = _time_misses(result)
            misses += [m for m in timed if m.stage in mistake.stages]
            noise = tuple(m for m in timed if m.stage not in mistake.stages)
        measured = {p.stage for p in run.phases if p.stage is not None}
        misses += [
            Miss(s, "memory", s, None, None, None, "not measured at the target")
            for s in stages
            if s not in measured
        ]
    findings = tuple(
        Named(f.kind, f.stage, f.quantity, f.direction, f.actionable) for f in result.findings
    )
    return Outcome(
        mistake.name,
        mistake.family,
        tuple(misses),
        findings,
        None,
        result.errors,
        facts,
        noise,
        mistake.direction,
    )


def run_mistake(
    mistake: Mistake, *, repeat: int | None = None
) -> tuple[Outcome, Calibration | str]:
    """Calibrate one mistake and evaluate it."""
    result = calibrate_mistake(mistake, repeat=repeat)
    stages = tuple(compile_mistake(mistake).stages)
    return evaluate(mistake, result, stages), result
