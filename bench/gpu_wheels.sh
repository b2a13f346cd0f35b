#!/usr/bin/env bash
# Fill .gpu-wheels/ (git-ignored) with what bench/gpu_all.sh needs on the bare GPU machine, which has
# torch, transformers and the scientific stack but no package registry (../shared/gpu/README.md).
# Run from the project root, here, before the GPU session:
#   bash bench/gpu_wheels.sh            # the server, the client, py-spy
#   bash bench/gpu_wheels.sh --gradio   # + gradio 6 and what it needs beyond the machine's packages
# Versions follow this checkout's .venv where it has the package, so both machines run the same code.
set -euo pipefail
cd "$(dirname "$0")/.."
extra=()
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
total=$(du -sm .gpu-wheels | cut -f1)
echo "gpu_wheels.sh: .gpu-wheels is ${total} MiB (the device tool carries at most 64 MiB with the tree)"
