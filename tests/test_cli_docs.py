"""docs/cli.md covers every `dslc` command and every option of each, checked against the click
definitions (a new option without a line in the page fails here)."""

from __future__ import annotations

import re

import pytest

from tests.docs_runner import ROOT
from tests.test_cli_grammar import commands, visible_options

PAGE = (ROOT / "docs" / "cli.md").read_text()
GLOBAL = {"--color", "--width", "--quiet", "-q", "--help"}  # in the page's Conventions


def section(name: str) -> str:
    """The text under the heading `## \\`dslc NAME ...\\`` up to the next `## `."""
    found = re.search(rf"^## `dslc {name}\b.*?$(.*?)(?=^## |\Z)", PAGE, re.MULTILINE | re.DOTALL)
    assert found, f"docs/cli.md has no section `## dslc {name} ...`"
    return found.group(0)


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_option_of_every_command_is_in_its_section(name: str) -> None:
    text = section(name)
    missing = [
        opt
        for option in visible_options(commands()[name])
        for opt in option.opts
        if opt.startswith("--") and opt not in GLOBAL and opt not in text
    ]
    assert not missing, f"docs/cli.md, dslc {name}: no word on {missing}"


def test_the_conventions_name_the_global_options() -> None:
    conventions = PAGE.split("## Conventions", 1)[1].split("\n## ", 1)[0]
    for opt in ("--color", "--width", "--quiet", "--json", "NAME=VALUE[,...]"):
        assert opt in conventions, opt
