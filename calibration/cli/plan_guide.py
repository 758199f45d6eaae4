"""The words of `dslc plan`'s report for a first reader (docs/planning.md's terms): each term the
lines and tables use, explained once under them by ``--explain`` (data only, no I/O)."""

from __future__ import annotations

#: Each term of the plan's report in full, in the order the report shows them.
PLAN_EXPLAINED = (
    (
        "device, reserve, usable, host memory",
        (
            "The capacity planned for (--device-memory), the part kept free for what no "
            "calibration sees (--reserve: by default max(1 GiB, 2 %), the CUDA context and the "
            "allocator's fragmentation), and what is left for the weights and the activations: "
            "usable. host memory (--host-memory) bounds the host copies of what stays off the "
            "device; a plan whose copies do not fit there is refused."
        ),
    ),
    (
        "targets",
        (
            "The workloads planned together (--target, or the calibrations' own): every phase of "
            "every target must fit, and the transfer is summed over them, each by its weight "
            "(calibrations of the same target from several ranks merge to the most cautious)."
        ),
    ),
    (
        "transfer per request, pinned, pageable, host copies",
        (
            "The bytes copied from the host to the device in one request under the placement and "
            "the time they take at --bandwidth. A host copy is what a component keeps off the "
            "device (offloaded whole, or its streamed layers); pinned ones (page-locked) are read "
            "by the copy engine directly, pageable ones are staged through a buffer of the "
            "driver, --pageable-factor times slower per byte. Under --pin-budget the copies moved "
            "most often get the pins; (layers 2-4 pinned) says which layers did."
        ),
    ),
    (
        "predicted, compute, (none hidden)",
        (
            "Each target's request time under the plan: the calibration's compute (unknown where "
            "no time was calibrated) plus the transfer, minus the part of it an overlap with "
            "compute would hide. The placements applied copy without a prefetch stream, so no "
            "overlap is modelled: (none hidden), every copy adds to the request."
        ),
    ),
    (
        "not proven the least",
        (
            "The search stopped at a limit before it proved no placement moves fewer bytes: the "
            "plan fits, the least possible transfer lies between the bound shown and the plan's. "
            "It is still a valid plan (warning[plan-unproven])."
        ),
    ),
    (
        "placement: resident, offloaded, layerwise k/N (streamed), grouped",
        (
            "resident: the component's weights stay on the device for the whole request. "
            "offloaded: its weights live on the host and are onloaded whole for each phase that "
            "uses it, then dropped. layerwise k/N: a component of N layers keeps k of them "
            "resident and streams the others through a one-layer buffer, each onloaded as its "
            "turn comes. grouped: its weights live on the host and are onloaded block group by "
            "block group while it runs (its largest group and what lies outside its blocks on "
            "the device at once), all of them moved on every call of it."
        ),
    ),
    (
        "on device, onloaded, transfer",
        (
            "on device: the component's bytes resident for the whole request. onloaded: the bytes "
            "copied to the device per request for it (its whole weights, or its streamed layers, "
            "times its uses). transfer: the time those copies take at --bandwidth, pageable bytes "
            "counted --pageable-factor times."
        ),
    ),
    (
        "binds",
        (
            "Why the component is not resident: the target and phase whose memory keeps it off "
            "the device, and how much is missing there (missing N); a component with room for "
            "it, or already resident, shows -."
        ),
    ),
    (
        "activation bound, weights, headroom",
        (
            "Per phase of each target: the calibration's peak bound with the weights left out (the "
            "activations, their margin included; `dslc calibrate`'s peak bound includes the "
            "weights), the weights on the device in that phase (resident, plus what is onloaded "
            "for it), and what is left of usable (negative: an overflow). (N as a layer arrives) "
            "is the headroom at the moment a streamed layer lands, when the phase's peak and its "
            "weights meet then."
        ),
    ),
    (
        "nothing fits, shortfall",
        (
            "No placement fits: the shortfall names where. device: even with every other "
            "component off the device, a phase needs more than usable (exit 1, by how much). "
            "host: every placement that fits the device needs more host memory for its copies "
            "than --host-memory allows."
        ),
    ),
)
