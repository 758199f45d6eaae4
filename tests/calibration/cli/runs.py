"""Option lists several CLI tests run: the docs' small FLUX and the two-tower pipeline larger than
its capped device."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"

#: The tiny FLUX from a 32x32 probe to two steps at 64x64, one round, no time probe.
SMALL_FLUX = [
    "--example",
    "flux",
    "--probe",
    "steps=1,height=32,width=32",
    "--target",
    "steps=2,height=64,width=64",
    "--repeat",
    "1",
    "--no-time-probe",
]
#: The device cap of ``TWO_TOWERS``: less than its weights.
TOWERS_CAP = 640 * 1024
#: tests/calibration/data/two_tower.py on a device capped below its weights.
TWO_TOWERS = [
    "--pipeline",
    f"{DATA / 'two_tower.py'}:build",
    "--formulas",
    str(DATA / "two_tower.wf"),
    "--repeat",
    "1",
    "--no-time-probe",
    "--device-capacity",
    "640KiB",
]
