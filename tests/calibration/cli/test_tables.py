"""The calibrate and plan tables at 60, 80 and 120 columns, with their units (golden files).

Regenerate (then review every change by eye) with
`UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/calibration/cli/test_tables.py`.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from artifact.units import show_bytes, show_seconds
from calibration.cli.plan import plan
from calibration.cli.show import MEMORY_HEADERS, MEMORY_RIGHT, TIME_HEADERS, TIME_RIGHT
from dslc.cli import cli
from dslc.render_rich import Output
from tests.calibration.cli.test_plan import calibration_document

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "tables"
WIDTHS = (60, 80, 120)
MiB = 1 << 20

# A calibration's rows, spelled by the one formatter of units (the run itself is tested elsewhere).
MEMORY_ROWS = [
    [label, method, margin, *map(show_bytes, values), error, ok]
    for label, method, margin, values, error, ok in [
        (
            "stage:TextEncodingStage",
            "measurement",
            "-",
            (1.2 * MiB, 1.2 * MiB, 1.2 * MiB),
            "+0.0%",
            "yes",
        ),
        (
            "stage:DenoisingStage",
            "fit",
            "evidence 1.05",
            (20.5 * MiB, 21.5 * MiB, 20.1 * MiB),
            "+2.0%",
            "yes",
        ),
        (
            "stage:DecodingStage",
            "scaled",
            "fixed 1.2",
            (163 * MiB, 195.6 * MiB, 161.9 * MiB),
            "+0.7%",
            "yes",
        ),
        ("request", "fit", "fixed 1.2", (171.3 * MiB, 205.6 * MiB, 170 * MiB), "+0.8%", "yes"),
    ]
]
TIME_ROWS = [
    [
        "TextEncodingStage",
        "measurement",
        show_seconds(0.00035),
        "±" + show_seconds(4e-5),
        show_seconds(0.00036),
        "-2.8%",
    ],
    [
        "DenoisingStage",
        "fit",
        show_seconds(1.52),
        "±" + show_seconds(0.031),
        show_seconds(1.49),
        "+2.0%",
    ],
    ["(outside stages)", "measurement", show_seconds(0.012), "-", show_seconds(0.011), "-"],
    ["request", "fit", show_seconds(1.6), "±" + show_seconds(0.033), show_seconds(1.55), "+3.2%"],
]


def check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(actual)
    assert path.exists(), f"missing {path}; run with UPDATE_GOLDEN=1 and review it"
    assert actual == path.read_text()


def fits(text: str, width: int) -> bool:
    return all(len(line) <= width for line in text.splitlines())


@pytest.mark.parametrize("width", WIDTHS)
def test_calibrate_tables(width: int) -> None:
    out = io.StringIO()
    output = Output(out, False, width)
    output.table(MEMORY_HEADERS, MEMORY_ROWS, MEMORY_RIGHT)
    output.line()
    output.table(TIME_HEADERS, TIME_ROWS, TIME_RIGHT)
    text = out.getvalue()
    assert fits(text, width)
    for unit in ("MiB", "µs", "ms", " s"):
        assert unit in text
    check_golden(f"calibrate-run-{width}.txt", text)


@pytest.mark.parametrize("width", WIDTHS)
def test_plan_tables(width: int, tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(calibration_document()))
    args = ["--width", str(width), "plan", "--calibration", str(path), "--device-memory", "40GiB"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert fits(text, width)
    assert "GiB" in text and " ms" in text and "activation bound" in text
    check_golden(f"plan-{width}.txt", text)


def test_the_binds_column_has_the_jsons_sign(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(calibration_document()))
    base = ["--calibration", str(path), "--device-memory", "40GiB"]
    doc = json.loads(CliRunner().invoke(plan, [*base, "--json"]).stdout)
    text = CliRunner().invoke(plan, base).stdout
    bound = [c for c in doc["components"] if c["binding_phase"] is not None]
    assert bound and all(c["missing_bytes"] > 0 for c in bound)
    for c in bound:
        assert f"{c['binding_phase']} (missing {show_bytes(c['missing_bytes'])})" in text
    assert "(-" not in text
