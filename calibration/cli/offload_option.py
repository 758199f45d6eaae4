"""``--calibrate-offload`` and ``--device-capacity``: how the pipeline sits on the device while it
is measured (`dslc calibrate`, `dslc plan`, `dslc infer`; docs/measurement.md, "Calibrating under
offload").

The option is checked when parsed (exit 2: a name it does not know, ``plan:`` without a file);
the file of ``plan:FILE`` is read when the command runs, before anything is built
(``calibration.core.offload.placing``: exit 1 naming the file, as any bad input file).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import click

from artifact.limits import MAX_TEXT_LENGTH
from artifact.units import parse_size
from calibration.core.offload import Offload, plan_path

Command = TypeVar("Command", bound=Callable[..., object])

#: The names ``--calibrate-offload`` takes as they are (``plan`` takes a file: ``plan:FILE``).
NAMED = tuple(o.value for o in Offload if o is not Offload.PLAN)
METAVAR = "|".join((*NAMED, "plan:FILE"))


class OffloadType(click.ParamType):
    """``auto``, ``none``, ``model``, ``group`` or ``plan:FILE``, kept as given (a path at most
    ``MAX_TEXT_LENGTH`` characters: the longest a system takes, and what a message can show)."""

    name = "offload"

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return METAVAR

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        text = str(value)
        if text in NAMED:
            return text
        path = plan_path(text)
        if path is None and text != Offload.PLAN.value:
            shown = text if len(text) <= 48 else text[:45] + "..."
            self.fail(f"{shown!r} is not one of {', '.join(NAMED)}, plan:FILE", param, ctx)
        if not path:
            self.fail(
                "plan needs the plan's file: plan:FILE (what `dslc plan --json` writes)", param, ctx
            )
        if len(path) > MAX_TEXT_LENGTH:
            self.fail(
                f"a plan file's path of {len(path):,} characters; at most {MAX_TEXT_LENGTH:,}",
                param,
                ctx,
            )
        return text


def size_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A size with its unit (24GiB; 24 alone is refused: 24 bytes is rarely meant), above 0."""
    if value is None:
        return None
    try:
        size = parse_size(value, unit_required=True)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
    if size <= 0:
        raise click.BadParameter("must be > 0", ctx, param)
    return size


def offload_options(command: Command) -> Command:
    """How the pipeline sits on the device while it is measured, and the device's cap."""
    options: Sequence[Callable[[Command], Command]] = [
        click.option(
            "--calibrate-offload",
            "offload",
            type=OffloadType(),
            default=Offload.AUTO.value,
            show_default=True,
            help="How the pipeline sits on the device while calibrating: none (all of it), "
            "model (diffusers' model CPU offload), group (block-level group offloading), "
            "plan:FILE (a plan saved by `dslc plan --json`, applied); auto: model when the weights "
            "exceed --device-capacity, group when one component alone does, else none.",
        ),
        click.option(
            "--device-capacity",
            "capacity",
            callback=size_option,
            metavar="SIZE",
            help="Cap the device while calibrating (24GiB): a larger allocation raises "
            "out-of-memory, on CUDA and on the CPU alike [default: the whole device].",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command
