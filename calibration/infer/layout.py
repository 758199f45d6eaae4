"""Which component opens which stage, found from what runs: `dslc infer`'s discovery.

A discovery formula gives every module (and a VAE's ``encode`` / ``decode``) a stage of its own;
two requests at the base size, one step apart, show which components run (the others are left
out), in which order, and which run more often with one step more: the denoisers, whose stage is
counted `per step`. Stages are then named by the project's convention: text encoders before the
denoisers open TextEncodingStage, other encoders ImageEncodingStage, the denoisers
DenoisingStage, everything after DecodingStage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from attrs import frozen

from dslc import ast
from runtime.estimate.fit import PhaseKind
from runtime.record import WarmupRecord

ENTRY_METHODS = ("encode", "decode")
DENOISE = "DenoisingStage"


@frozen
class Use:
    """One component entry point a stage uses, as a formula writes it."""

    component: str
    method: str = "forward"

    @property
    def text(self) -> str:
        return self.component if self.method == "forward" else f"{self.component}.{self.method}"

    @property
    def probe_stage(self) -> str:
        return "Probe_" + self.text.replace(".", "_")

    @property
    def node(self) -> ast.Use:
        """The entry point as a stage's `uses` list holds it."""
        return ast.Use(self.component, None if self.method == "forward" else self.method)


@frozen
class StagePlan:
    name: str
    uses: tuple[Use, ...]
    stepped: bool


def probe_uses(modules: Mapping[str, object]) -> list[Use]:
    """Every entry point discovery hooks: ``encode``/``decode`` where a module has them, else
    its forward."""
    out: list[Use] = []
    for name, module in modules.items():
        methods = [m for m in ENTRY_METHODS if callable(getattr(module, m, None))]
        out.extend(Use(name, m) for m in methods) if methods else out.append(Use(name))
    return out


def discovery_stages(uses: Sequence[Use]) -> tuple[ast.Stage, ...]:
    """One empty stage per entry point."""
    return tuple(ast.Stage(u.probe_stage, (), (u.node,)) for u in uses)


def _counts(record: WarmupRecord, uses: Sequence[Use]) -> dict[Use, int]:
    by_stage = {u.probe_stage: u for u in uses}
    out: dict[Use, int] = {}
    for phase in record.phases:
        if phase.kind == PhaseKind.COMPONENT and phase.stage in by_stage:
            use = by_stage[phase.stage]
            out[use] = out.get(use, 0) + phase.count
    return out


def layout(uses: Sequence[Use], base: WarmupRecord, more: WarmupRecord) -> list[StagePlan]:
    """The stages from two discovery records (``more``: one step more than ``base``)."""
    ran, again = _counts(base, uses), _counts(more, uses)
    order = [u for u in ran]  # phases are recorded in the order they first opened
    denoisers = [u for u in order if again.get(u, 0) > ran[u]]
    if not denoisers:
        return [StagePlan(f"Stage{k + 1}", (u,), False) for k, u in enumerate(order)]
    first = order.index(denoisers[0])
    last = max(order.index(d) for d in denoisers)
    before = [u for u in order[:first] if u not in denoisers]
    after = [u for u in order[last + 1 :] if u not in denoisers]
    text = tuple(u for u in before if u.component.startswith("text_encoder"))
    image = tuple(u for u in before if u not in text)
    plans = []
    if text:
        plans.append(StagePlan("TextEncodingStage", text, False))
    if image:
        plans.append(StagePlan("ImageEncodingStage", image, False))
    plans.append(StagePlan(DENOISE, tuple(denoisers), True))
    if after:
        plans.append(StagePlan("DecodingStage", tuple(after), False))
    return plans


def stage_node(
    plan: StagePlan, fields: Sequence[ast.Field] = (), trivia: ast.Trivia | None = None
) -> ast.Stage:
    """``stage NAME uses a, b [per step] { fields }``."""
    uses = tuple(u.node for u in plan.uses)
    return ast.Stage(plan.name, tuple(fields), uses, plan.stepped, trivia=trivia)
