"""The recorder's cost per op, apart from the ops' own work: a figure a loaded machine moves little.

``bench/serve_overhead.py --derived`` uses it. One request is run under a capturing mode that
keeps, for each op it dispatches, a stand-in with the op's schema (so the recorder's dispatch
mode decides the same plan for it) whose call makes fresh empty outputs of the same structure,
and the op's arguments with every activation replaced by one small tensor (weights and their
views kept: their reads take the recorder's other path). Replaying that list through the
recorder's ``__torch_dispatch__`` and through an empty mode's, many thousand calls each,
alternating, times exactly the Python work the recorder adds per op (the plan look-up, the
weight reads, counting the outputs and forgetting them when freed), not the ops. Torch's own
cost of entering any Python mode is measured apart (``mode_floor``): the same ops, each with its
arguments on the meta device (sizes, strides and dtypes kept, no data: the dispatcher's work and
the shape functions, not the arithmetic), called with and without an empty mode pushed; the few
that cannot run there (a copy to the host, a read of a value) are left out and counted.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import torch
from attrs import frozen
from torch._ops import OpOverload
from torch.utils._python_dispatch import TorchDispatchMode

from runtime.measure.backends import LiveStorageCounter, _LiveStorageMode
from runtime.measure.residency import WeightMap, WeightReads

Dispatch = Callable[..., object]


class EmptyMode(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch's is untyped
    """Calls each op and nothing else: the floor of any Python dispatch mode."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # as the recorder's mode: no dynamo wrapper

    def __torch_dispatch__(
        self,
        func: Callable[..., object],
        types: object,
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        return func(*args, **(kwargs or {}))


class _Stand:
    """An op's stand-in: its schema (the recorder's plan reads it), fresh empty outputs."""

    __slots__ = ("_schema", "outputs")

    def __init__(self, func: OpOverload) -> None:
        self._schema = func._schema
        self.outputs: object = None

    def __call__(self, *args: object, **kwargs: object) -> object:
        shape = self.outputs
        if shape is _TENSOR:
            return torch.empty(0)
        if shape is _SELF:  # in place: its first argument, as the op returns it
            return args[0]
        if type(shape) is int:  # a tuple of that many tensors
            return tuple(torch.empty(0) for _ in range(shape))
        return shape


_TENSOR, _SELF = object(), object()


def _outputs(out: object, args: tuple[object, ...]) -> object:
    """What a stand-in returns for an op that returned ``out``: the same structure, empty."""
    if args and out is args[0]:
        return _SELF
    if isinstance(out, torch.Tensor):
        return _TENSOR
    if isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out):
        return len(out)
    return None if isinstance(out, (tuple, list)) else out


Call = tuple[Callable[..., object], tuple[object, ...], dict[str, object]]
META = torch.device("meta")


def _meta(a: object) -> object:
    """``a`` on the meta device (same sizes, strides, dtype; no data): an op on it does the
    dispatcher's work and its shape function, not the arithmetic."""
    if isinstance(a, torch.Tensor):
        return torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=META)
    if isinstance(a, torch.device):
        return META
    if isinstance(a, (list, tuple)):
        return type(a)(_meta(x) for x in a)
    return a


class _Capture(EmptyMode):
    """Runs each op and keeps its stand-in and its arguments (activations replaced), and the op
    itself with its arguments on the meta device."""

    def __init__(self, weights: WeightMap) -> None:
        super().__init__()
        self.weights = weights
        self.stands: dict[int, tuple[OpOverload, _Stand]] = {}
        self.calls: list[Call] = []
        self.metas: list[Call] = []
        self.small = torch.empty(1)

    def _keep(self, a: object) -> object:
        if isinstance(a, torch.Tensor):
            return a if self.weights.component_of(a) is not None else self.small
        if isinstance(a, (list, tuple)):
            return type(a)(self._keep(x) for x in a)
        return a

    def __torch_dispatch__(
        self,
        func: Callable[..., object],
        types: object,
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        out = func(*args, **(kwargs or {}))
        assert isinstance(func, OpOverload)
        entry = self.stands.get(id(func))
        if entry is None:
            entry = self.stands[id(func)] = (func, _Stand(func))
        entry[1].outputs = _outputs(out, args)
        kept = {k: self._keep(v) for k, v in (kwargs or {}).items()}
        self.calls.append((entry[1], tuple(self._keep(a) for a in args), kept))
        metas = {k: _meta(v) for k, v in (kwargs or {}).items()}
        self.metas.append((func, tuple(_meta(a) for a in args), metas))
        return out


@frozen
class OpCost:
    """Seconds per op of the recorder's dispatch and of an empty mode's, stand-ins replayed."""

    ops: int  # ops one request dispatches
    distinct: int  # distinct op overloads among them
    recorder: float  # CPU seconds per op, the recorder's ``__torch_dispatch__`` (median)
    empty: float  # the same through an empty mode's
    floor: float  # torch's own cost per op of entering any Python mode (``mode_floor``)
    floor_ops: int  # of ``ops``, those the floor was measured on (the ones the meta device runs)

    @property
    def extra(self) -> float:
        """What the recorder's mode costs per op: the floor and its work above an empty mode's."""
        return self.floor + self.recorder - self.empty


def capture(run: Callable[[], object], weights: WeightMap) -> _Capture:
    """The ops one call of ``run`` dispatches, with stand-ins, ready to replay."""
    mode = _Capture(weights)
    with mode:
        run()
    return mode


def _replay(dispatch: Dispatch, calls: Sequence[Call]) -> float:
    """CPU seconds to dispatch every captured call once (each output freed at the next)."""
    start = time.process_time()
    for stand, args, kwargs in calls:
        out = dispatch(stand, (), args, kwargs)
    del out
    return time.process_time() - start


def op_cost(captured: _Capture, reads: WeightReads, repeats: int = 15) -> OpCost:
    """The recorder's and an empty mode's seconds per captured op, ``repeats`` passes each,
    alternating (medians), and torch's floor of a Python mode."""
    counter = LiveStorageCounter()
    counter.add(captured.small.untyped_storage())  # in-place ops on activations: followed
    recorder = _LiveStorageMode(counter, "cpu", reads)
    empty = EmptyMode()
    calls = captured.calls
    _replay(recorder.__torch_dispatch__, calls)  # the plans decided once, as in a request
    mine, theirs = [], []
    for _ in range(repeats):
        mine.append(_replay(recorder.__torch_dispatch__, calls))
        theirs.append(_replay(empty.__torch_dispatch__, calls))
    n = len(calls)
    return OpCost(
        n,
        len(captured.stands),
        statistics.median(mine) / n,
        statistics.median(theirs) / n,
        *mode_floor(captured),
    )


def _runs(call: Call) -> bool:
    """Whether an op runs on the meta device (not all do: a copy to the host, a read of a value)."""
    func, args, kwargs = call
    try:
        func(*args, **kwargs)
    except Exception:  # noqa: BLE001 - any op that cannot is left out of the floor
        return False
    return True


def _called(calls: Sequence[Call]) -> float:
    """CPU seconds to call every op once, through whatever mode is pushed."""
    start = time.process_time()
    for func, args, kwargs in calls:
        func(*args, **kwargs)
    return time.process_time() - start


def mode_floor(captured: _Capture, repeats: int = 15) -> tuple[float, int]:
    """CPU seconds per op that an empty Python mode adds to the request's own ops run on the meta
    device (medians of ``repeats`` alternating passes), and how many of its ops ran there."""
    metas = [c for c in captured.metas if _runs(c)]
    diffs = []
    for _ in range(repeats):
        bare = _called(metas)
        with EmptyMode():
            moded = _called(metas)
        diffs.append((moded - bare) / len(metas))
    return statistics.median(diffs), len(metas)
