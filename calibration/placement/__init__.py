"""How a module's weights move on and off the device by its libraries' own hooks: one registry of
placement mechanisms (``mechanisms``: accelerate's model offload, diffusers' group offload, the
plan's layerwise streaming), the pipeline-wide placements a calibration runs under (``pipeline``)
and every private name of those libraries that placement touches (``private``)."""
