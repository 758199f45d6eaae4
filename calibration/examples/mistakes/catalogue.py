"""The seeded mistakes: each one exact edit of a real formula file, its shapes and what a correct
verdict names (``model.Mistake``)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from artifact.point import Point
from calibration.examples.mistakes.model import Edit, Mistake

_SD = "tests/calibration/data/custom_sd.wf"
#: The tutorial's command: --probe steps=2,height=32,width=32 --target steps=6,height=64,width=64.
_SD_WARMUP: Point = {"steps": 2, "height": 16, "width": 16}
_SD_PROBE: Point = {"steps": 2, "height": 32, "width": 32}
_SD_TARGET: Point = {"steps": 6, "height": 64, "width": 64}
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
                "memory ~ [latent_pixels * batch, if cfg then 1 else 0]",
                "memory ~ latent_pixels",
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
                "iterations = steps  # one expert call per step (high or low noise)\n"
                "        memory ~ [tokens, if cfg then tokens else 0]  # one pass + predictions "
                "held under CFG\n        time ~ tokens * (if cfg then 2 else 1)",
                "iterations = steps  # one expert call per step (high or low noise)\n"
                "        memory ~ [tokens, if cfg then tokens else 0]  # one pass + predictions "
                "held under CFG\n        time ~ tokens",
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
                "memory ~ [height * width, if cfg then tokens else 0]  # pixels + the held neg",
                "memory ~ 1  # pixels + the held neg",
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
                "memory ~ [tokens * batch, if cfg then tokens else 0]  # batched call",
                "memory ~ batch  # batched call",
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
        "wan-decode-no-chunk",
        "missing term",
        "wan",
        "formulas/wan.wf",
        "wan2_1_t2v_1_3b",
        (
            Edit(
                "num_inference_steps=50 (restated; same as the parent)\n}",
                "num_inference_steps=50 (restated; same as the parent)\n"
                "    stage DecodingStage { memory ~ frames * height * width }\n}",
            ),
        ),
        warmup={"steps": 2, "frames": 9, "height": 32, "width": 32},
        probe={"steps": 2, "frames": 17, "height": 32, "width": 32},
        target={"steps": 4, "frames": 25, "height": 48, "width": 48},
        stages=("DecodingStage",),
        direction=None,
        why="the decoder's chunk working set (one latent frame's, whatever the frames) left out: "
        "a target of 25 frames from sizes of at most 17 (issue 41: +46 % over, silent)",
    ),
    Mistake(
        "flux-denoise-grows-with-steps",
        "a term the stage does not have",
        "flux",
        "formulas/flux.wf",
        "flux1_dev",
        (
            Edit(
                "memory ~ [tokens, if cfg then tokens else 0]  # one pass",
                "memory ~ [tokens * steps, if cfg then tokens else 0]  # one pass",
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
