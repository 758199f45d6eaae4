"""Work whose recursion is bounded by its input (a JSON parse, an expression tree 200 deep) must
not fail because its caller is already deep: a ``RecursionError`` there is retried on a fresh
stack (a new thread, whose recursion depth starts at 0), so only the input decides."""

from __future__ import annotations

TYPE_CHECKING = False  # (not typing's: `import runtime` stays light)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

__all__ = ["on_fresh_stack", "retried_on_fresh_stack"]


def retried_on_fresh_stack(work: Callable[[], T]) -> T:
    """``work()``; when the caller's depth made it a ``RecursionError``, ``work()`` on a fresh
    stack (raising whatever it raises there)."""
    try:
        return work()
    except RecursionError:
        return on_fresh_stack(work)


def on_fresh_stack(work: Callable[[], T]) -> T:
    """``work()`` in a new thread, waited for; its exception re-raised in the caller's thread."""
    import threading  # here: `import runtime` stays light, and most work never needs it

    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread below
            failure.append(exc)

    worker = threading.Thread(target=run, name="fresh-stack", daemon=True)
    worker.start()
    worker.join()
    if failure:
        raise failure[0]
    return outcome[0]
