#!/usr/bin/env bash
# bench/gpu_all.py on the bare GPU machine: install the carried wheels (.gpu-wheels, filled here by
# bench/gpu_wheels.sh), then run one part of the list. Usage (one device command each):
#   bash bench/gpu_all.sh --part 1 --out $OUT
#   bash bench/gpu_all.sh --part 2 --out $OUT
# With PYTHON set (a virtualenv's python: the CPU dry run here) it runs that python and installs nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ] && [ -d .gpu-wheels ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .gpu-wheels/*.whl || { echo "gpu_all.sh: installing .gpu-wheels failed" >&2; exit 2; }
  export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
  if [ -d .gpu-wheels/torchvision ] && ! python3 -c "import torchvision.io" 2>/dev/null; then
    tv=$(python3 bench/gpu_all.py --torchvision-wheel .gpu-wheels/torchvision)  # the one built for this torch
    if [ -n "$tv" ]; then python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$tv"
    else echo "gpu_all.sh: no carried torchvision wheel matches this torch (decode: device is skipped)" >&2; fi
  fi
fi
export PYTHONUNBUFFERED=1 GRADIO_ANALYTICS_ENABLED=False
exec "${PYTHON:-python3}" bench/gpu_all.py "$@"
