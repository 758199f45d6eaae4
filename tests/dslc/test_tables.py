"""Tables at 60, 80 and 120 columns (golden files), wrapping only at name boundaries, pipes
unchanged.

Regenerate the golden files (then review every change by eye) with
`UPDATE_GOLDEN=1 pytest tests/dslc/test_tables.py`.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from dslc.cli import cli
from dslc.render_rich import Output, table_width
from dslc.tables import MAX_ROW_LINES, MIN_VALUE_WIDTH, layout, wrap

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "tables"
WIDTHS = (60, 80, 120)

# A Wan-like pipeline: long stage names, long formulas, a memory of two terms.
SOURCE = """\
pipeline video_model {
    param steps: int = 40 in [1, 1000]
    param frames: int = 81 in [1, 1000] where frames % 4 == 1
    param height: int = 720 in [16, 4096] where height % 16 == 0
    param width: int = 1280 in [16, 4096] where width % 16 == 0
    param cfg: bool = true
    let latent_frames = (frames - 1) // 4 + 1
    let tokens = latent_frames * (height // 16) * (width // 16)
    stage TextEncodingStage { iterations = 1 }
    stage DenoisingStage {
        iterations = steps
        memory ~ tokens
        time ~ tokens * (if cfg then 2 else 1)
    }
    stage DecodingStage { memory ~ [height * width, latent_frames * height * width] }
}
"""

# What `dslc calibrate` prints (built from data: the calibrate session itself lives elsewhere).
CALIBRATE_HEADERS = [
    "memory",
    "method",
    "predicted peak",
    "peak bound",
    "measured peak",
    "error",
    "bound >= measured",
]
CALIBRATE_ROWS = [
    [
        "text_encoder@TextEncodingStage",
        "measurement",
        "1.2 MiB",
        "1.4 MiB",
        "1.2 MiB",
        "+0.0%",
        "yes",
    ],
    ["transformer@DenoisingStage", "fit", "20.5 MiB", "24.6 MiB", "20.1 MiB", "+2.0%", "yes"],
    ["vae@DecodingStage", "scaled", "163 MiB", "196 MiB", "162 MiB", "+0.7%", "yes"],
    ["request", "fit", "171 MiB", "206 MiB", "170 MiB", "+0.8%", "yes"],
]
CALIBRATE_RIGHT = [False, False, True, True, True, True, False]


def check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(actual)
    assert path.exists(), f"missing {path}; run with UPDATE_GOLDEN=1 and review it"
    assert actual == path.read_text()


def dslc(*args: str, columns: int | None) -> str:
    width = () if columns is None else ("--width", str(columns))
    result = CliRunner().invoke(cli, [*width, *args], env={"COLUMNS": "60"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "video.wf"
    path.write_text(SOURCE)
    return path


def assert_fits(text: str, width: int) -> None:
    for line in text.splitlines():
        assert len(line) <= width, line


@pytest.mark.parametrize("width", WIDTHS)
def test_explain_table(source: Path, width: int) -> None:
    text = dslc("explain", str(source), "video_model", "--probe", "steps=4", columns=width)
    assert_fits(text, width)
    check_golden(f"explain-{width}.txt", text)


@pytest.mark.parametrize("width", WIDTHS)
def test_eval_table(source: Path, width: int) -> None:
    text = dslc("eval", str(source), "video_model", "--set", "steps=4", columns=width)
    assert_fits(text, width)
    check_golden(f"eval-{width}.txt", text)


@pytest.mark.parametrize("width", WIDTHS)
def test_calibrate_like_table(width: int) -> None:
    lines = layout(CALIBRATE_HEADERS, CALIBRATE_ROWS, CALIBRATE_RIGHT, width)
    text = "".join(line.text + "\n" for line in lines)
    assert_fits(text, width)
    check_golden(f"calibrate-{width}.txt", text)


def test_no_name_is_cut_mid_word_at_80_columns(source: Path) -> None:
    text = dslc("explain", str(source), "video_model", columns=80)
    text += "".join(
        line.text + "\n" for line in layout(CALIBRATE_HEADERS, CALIBRATE_ROWS, CALIBRATE_RIGHT, 80)
    )
    for name in ("TextEncodingStage", "DenoisingStage", "DecodingStage", "measurement"):
        assert re.search(rf"(?<![A-Za-z]){name}(?![A-Za-z])", text), name


def test_piped_output_keeps_its_natural_width_even_with_columns_set(source: Path) -> None:
    text = dslc("explain", str(source), "video_model", "--probe", "steps=4", columns=None)
    rows = text.splitlines()[3:]
    assert rows[0].split() == ["stage", "field", "probe", "target", "ratio", "formula"]
    assert len(rows) == 1 + 3 * 3 + 2  # one line per row: 3 fields of 3 stages, 2 memory terms
    assert max(map(len, rows)) > 120


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_table_width_is_the_terminals_and_never_a_pipes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "72")
    assert table_width(io.StringIO()) is None  # a pipe: natural width, whatever COLUMNS says
    assert table_width(Tty()) == 72
    assert table_width(io.StringIO(), 50) == 50  # --width wins everywhere
    assert table_width(Tty(), 0) is None  # --width 0: never wrap
    for junk in ("0", "-5", "wide", "99999999"):
        monkeypatch.setenv("COLUMNS", junk)
        assert table_width(Tty()) is None  # no real terminal behind this one


def test_coloured_table_has_the_same_text() -> None:
    plain, coloured = io.StringIO(), io.StringIO()
    Output(plain, False, 60).table(CALIBRATE_HEADERS, CALIBRATE_ROWS, CALIBRATE_RIGHT)
    Output(coloured, True, 60).table(CALIBRATE_HEADERS, CALIBRATE_ROWS, CALIBRATE_RIGHT)
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured.getvalue()) == plain.getvalue()
    assert "\x1b[" in coloured.getvalue()


def test_stacked_layout_leaves_out_empty_cells() -> None:
    lines = [line.text for line in layout(["stage", "memory"], [["  memory[0]", ""]], width=5)]
    assert lines == ["stage:  memory[0]"]


CELL = st.text(alphabet="ab_@.: *XY", min_size=0, max_size=40)


@given(CELL, st.integers(1, 50))
def test_wrap_keeps_every_character_but_spaces_and_fits(text: str, width: int) -> None:
    lines = wrap(text, width)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")
    assert all(len(line) <= width for line in lines) or len(text) <= width


@given(CELL, st.integers(1, 50))
def test_wrap_cuts_a_word_only_when_it_is_longer_than_the_width(text: str, width: int) -> None:
    words = re.findall(r"[^ @_:.,*/]+", text)
    if all(len(w) <= width for w in words):
        for line in wrap(text, width):
            joined = "".join(wrap(text, width))
            assert all(w in joined for w in words)
            assert len(line) <= width or line == text


@given(
    st.lists(st.lists(CELL, min_size=3, max_size=3), min_size=1, max_size=5),
    st.integers(20, 140),
)
def test_layout_fits_the_width(rows: list[list[str]], width: int) -> None:
    lines = layout(["name", "value", "n"], rows, [False, False, True], width)
    limit = max(width, len("value: ") + MIN_VALUE_WIDTH)
    assert all(len(line.text) <= limit for line in lines)


@given(st.lists(st.lists(CELL, min_size=2, max_size=2), min_size=1, max_size=5))
def test_layout_without_a_width_is_one_line_per_row(rows: list[list[str]]) -> None:
    lines = layout(["a", "b"], rows)
    assert len(lines) == 1 + len(rows)
    assert lines[0].role == "header"


def test_a_row_taller_than_the_limit_is_stacked() -> None:
    cell = " ".join(["word"] * (4 * (MAX_ROW_LINES + 1)))
    lines = layout(["key", "text"], [["k", cell]], width=30)
    assert lines[0].text.startswith("key:")
