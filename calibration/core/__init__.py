"""What a calibration runs on: the session, the host and its clock, the wiring of stages to
components, weights, calls, the relative costs of sizes, where a calibration is placed and the
user's pipeline factory."""
