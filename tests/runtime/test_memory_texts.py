"""A stage's declared memory terms as the formula file writes them (``Pipeline.memory_texts``,
``artifact.expr_text``): what a finding quotes when it names what a formula lacks."""

from __future__ import annotations

import pytest

from runtime import UnknownStageError

SOURCE = """
pipeline texts {
    param frames: int = 9 in [1, 81] where frames % 4 == 1
    param height: int = 64 in [16, 512] where height % 16 == 0
    param steps: int = 2 in [1, 50]
    let latent = (frames - 1) // 4 + 1
    let tokens = latent * (height // 16)
    stage A {
        iterations = 1
        memory ~ [tokens, tokens * tokens, (height + 100) - (frames - 1), (steps + 1) * height]
        time ~ tokens
    }
    stage B {
        iterations = 1
        memory ~ if steps > 2 then tokens else height
        time ~ 1
    }
    stage C {
        iterations = 1
        memory ~ max(tokens, 2 * height) + frames * height + (steps + 1) ** 2
        time ~ 1
    }
}
"""


def test_terms_read_as_written() -> None:
    from dslc.build import load_text

    pipeline = load_text(SOURCE, "texts.wf")["texts"]
    assert pipeline.memory_texts("A") == (
        "tokens",
        "tokens * tokens",
        "height + 100 - (frames - 1)",
        "(steps + 1) * height",
    )
    assert pipeline.memory_texts("B") == (None,)  # an `if`: named otherwise by the caller
    assert pipeline.memory_texts("C") == (
        "max(tokens, 2 * height) + frames * height + (steps + 1) ** 2",
    )
    with pytest.raises(UnknownStageError):
        pipeline.memory_texts("D")
