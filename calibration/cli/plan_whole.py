"""`dslc plan --whole STAGE=COMPONENT`: the phases that need a component's full weights at once
(a weight refresh, a LoRA load), parsed into ``calibration.plan.inputs.Whole`` and checked against
the calibration once it is read (docs/planning.md "Where each input comes from")."""

from __future__ import annotations

from collections.abc import Sequence

import click

from calibration.plan.inputs import UnknownWholeError, Whole


def _pairs(ctx: click.Context, param: click.Parameter, values: Sequence[str]) -> Whole:
    """Each --whole STAGE=COMPONENT as a pair (checked against the calibration once read)."""
    out = []
    for raw in values:
        stage, sep, component = raw.partition("=")
        if not sep or not stage.strip() or not component.strip():
            raise click.BadParameter(
                f"{raw!r}: give STAGE=COMPONENT (DenoisingStage=transformer)", ctx, param
            )
        out.append((stage.strip(), component.strip()))
    return tuple(out)


#: The option, as `dslc plan` takes it (with --validate too).
whole_option = click.option(
    "--whole",
    multiple=True,
    callback=_pairs,
    metavar="STAGE=COMPONENT",
    help="The stage's phases need COMPONENT's full weights on the device at once (a weight "
    "refresh, a LoRA load): never streamed there; repeatable.",
)


def unknown_whole(exc: UnknownWholeError) -> click.BadParameter:
    """A stage or component the calibration lacks: a usage error naming the known ones."""
    return click.BadParameter(str(exc), param_hint="--whole")
