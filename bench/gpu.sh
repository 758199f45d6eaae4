#!/usr/bin/env bash
# Everything that needs a CUDA device, in one short run (CI has none): the CUDA tests, the
# recorder's overhead with the allocator backend, pinned vs pageable copy rates (the measured
# factor beside the default --pageable-factor), pins made as planned (bench/pins_gpu.py: the VAE's
# host copy pinned after apply, not after undo; the pin tests: a frontier pins its layers' tensors
# only, a copy another owner holds stays pinned), the planner applied on the device, the serving
# lifecycle (a plan that must stream, validated; one forced to fail by an injected out-of-memory
# error, rolled back and re-planned; undo), a served trace on the GPU (`dslc serve --device cuda`:
# a request running and two queued, answered through a SIGTERM that drains them), and `dslc calibrate --device cuda --verify` on two
# examples (wall clock, allocator statistics) and under a saved plan that streams (`plan:FILE`),
# a plan with the VAE grouped validated on the device,
# and real architectures at their default workloads (bench/realsize.py: SD 1.5, SDXL, Wan 2.1
# 1.3B, FLUX.1-dev in bf16; random weights, nothing downloaded).
#
#     bash bench/gpu.sh            # from the repository root, after the README's setup command
#     PYTHON=python3 DSLC=dslc bash bench/gpu.sh   # a machine whose own Python has CUDA torch
#                                  # (then `pip install --no-deps -e .` first, for the dslc command)
#
# Prints each part's output; exits non-zero if a part fails. Record the output in bench/README.md.
set -u
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
dslc=${DSLC:-.venv/bin/dslc}
status=0
run() { echo "## $*"; "$@" || status=1; echo; }
run "$py" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0), torch.__version__)"
run "$py" -m pytest -q -rs tests/runtime/measure/test_backends.py tests/runtime/measure/test_serving.py tests/calibration/test_warmup.py tests/calibration/plan/test_pins_applied.py tests/calibration/plan/test_pin_book.py tests/calibration/plan/test_pin_state.py
run "$py" bench/record.py --rounds 9
run "$py" bench/copies.py
run "$py" bench/pins_gpu.py
run "$py" bench/plan_gpu.py --example flux
run "$py" bench/plan_gpu.py --example wan
run "$py" bench/lifecycle_gpu.py --example flux --device cuda
run "$dslc" calibrate --example flux --device cuda:0 --verify --repeat 3
run "$dslc" plan --example flux --device cuda:0 --device-memory cuda:0 --validate
run "$dslc" calibrate --example wan --device cuda --verify --repeat 3
saved=$(mktemp --suffix=.json)
small="--probe steps=1,height=32,width=32 --target steps=2,height=64,width=64"
run bash -c "\"$dslc\" plan --example flux --device cuda:0 $small --device-memory 1MiB --reserve 0 --json > $saved"
run "$dslc" calibrate --example flux --device cuda:0 $small --calibrate-offload "plan:$saved" --verify
# the grouped placement on CUDA: at 736 KiB the VAE whole does not fit its decode, grouped it
# does (on the CPU: "vae grouped", decode 733 KiB of 733 KiB predicted, holds); fails when no
# plan validates (exit 4) or the plan has the VAE otherwise
run bash -c "set -o pipefail; \"$dslc\" plan --example flux --device cuda:0 $small --device-memory 736KiB --reserve 0 --validate | awk '{print} /vae grouped/ {n++} END {exit !n}'"
run "$py" bench/serve_load.py --examples flux --requests 12 --serve-device cuda
run "$py" bench/realsize.py --params
run "$py" bench/realsize.py --cases sd15-gpu,sdxl-gpu,wan13b-gpu,flux-gpu --quiet
run "$py" bench/realsize.py --cases sdxl-gpu,flux-gpu --quiet --device-capacity 24GiB
run "$py" bench/realsize.py --cases flux-gpu,wan13b-gpu --quiet --device-capacity 48GiB
exit $status
