"""Measuring warmup requests: recorder, memory backends, layer uses, serving transition.

Imports torch (the runtime's formula evaluation does not); diffusers only inside ``examples``.
"""

from runtime.measure.backends import (
    AllocatorBackend,
    LiveTensorBackend,
    MemoryBackend,
    backend_for,
)
from runtime.measure.diffusers_hooks import (
    WAN_STAGES,
    diffusers_recorder,
    run_pipeline,
    step_callback,
)
from runtime.measure.distributed import (
    LOCAL,
    Agreement,
    TorchDistributedAgreement,
    agree_lighten_steps,
    agreement,
    reduce_record,
)
from runtime.measure.layers import LayerUseTracker, count_hooks, repeated_layers
from runtime.measure.recorder import AutoStages, FormulaPipeline, Request, WarmupRecorder
from runtime.measure.serving import ServingMonitor, ServingPeak, TransitionReport, enter_serving
from runtime.measure.windows import PeakWindows

__all__ = [
    "LOCAL",
    "WAN_STAGES",
    "Agreement",
    "AllocatorBackend",
    "AutoStages",
    "FormulaPipeline",
    "LayerUseTracker",
    "LiveTensorBackend",
    "MemoryBackend",
    "PeakWindows",
    "Request",
    "ServingMonitor",
    "ServingPeak",
    "TorchDistributedAgreement",
    "TransitionReport",
    "WarmupRecorder",
    "agree_lighten_steps",
    "agreement",
    "backend_for",
    "count_hooks",
    "diffusers_recorder",
    "enter_serving",
    "reduce_record",
    "repeated_layers",
    "run_pipeline",
    "step_callback",
]
