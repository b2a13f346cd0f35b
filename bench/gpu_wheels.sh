#!/usr/bin/env bash
# Fill .gpu-wheels/ (git-ignored) with what bench/gpu_all.sh needs on the bare GPU machine, which has
# torch, transformers and the scientific stack but no package registry (../shared/gpu/README.md).
# Run from the project root, here, before the GPU session:
#   bash bench/gpu_wheels.sh            # the server, the client, py-spy
#   bash bench/gpu_wheels.sh --gradio   # + gradio 6 and what it needs beyond the machine's packages
#   bash bench/gpu_wheels.sh --torchvision 0.26.0,0.28.0   # + these torchvision wheels (cp312, about 7.5 MiB
#       each) in .gpu-wheels/torchvision/, for decode: device; gpu_all.sh installs the one whose torch
#       pin matches the machine's torch, only if the machine has no torchvision (torch 2.N -> 0.(N+15))
# Versions follow this checkout's .venv where it has the package, so both machines run the same code.
set -euo pipefail
cd "$(dirname "$0")/.."
extra=()
tv_versions=""
if [ "${1:-}" = "--torchvision" ]; then tv_versions="${2:?--torchvision needs versions, e.g. 0.28.0}"; shift 2; fi
if [ "${1:-}" = "--gradio" ]; then
  pin() { # NAME -> NAME==VERSION from .venv, or NAME alone
    v=$(.venv/bin/python -m pip show "$1" 2>/dev/null | sed -n 's/^Version: //p')
    if [ -n "$v" ]; then echo "$1==$v"; else echo "$1"; fi
  }
  for p in gradio hf-gradio fastapi opentelemetry-api brotli groovy pydub safehttpx semantic-version \
           tomlkit pytz annotated-doc; do
    extra+=("$(pin "$p")")
  done
fi
mkdir -p "$(dirname "$(git rev-parse --git-path info/exclude)")"
bash ../shared/gpu/prepare-wheels.sh "${extra[@]}"
for v in ${tv_versions//,/ }; do  # beside the *.whl that gpu_all.sh installs: a mismatched one breaks transformers
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 -d .gpu-wheels/torchvision "torchvision==$v"
done
total=$(du -sm .gpu-wheels | cut -f1)
echo "gpu_wheels.sh: .gpu-wheels is ${total} MiB (the device tool carries at most 64 MiB with the tree)"
