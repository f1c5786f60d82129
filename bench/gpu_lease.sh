#!/usr/bin/env bash
# One lease of a GPU machine (the device tool's `run`), from the repository root:
#
#   bash bench/gpu_lease.sh            # carry .whl (nvmath-python) and .whl2 (cuda-core, cuda-pathfinder)
#
# That machine has cupy, PyTorch CUDA and JAX but no package registry: nvmath-python (the cuBLASLt
# route of a captured step's GEMMs) comes as wheels fetched here with `pip download` (bench/README.md,
# "GPU check"). tapelab runs from this tree (engine/ as the package `tapelab`), nothing is built.
# The sections run in the order of what they prove, each under its own timeout, each log under $OUT:
# the captured steps (one CUDA graph with their GEMMs), tapelab.compile on cuda, then the whole check.
set -u
OUT=${OUT:-/tmp/gpu_lease}
mkdir -p "$OUT" /tmp/pkg
ln -sfn "$PWD/engine" /tmp/pkg/tapelab
export PYTHONPATH=/tmp/pkg PYTHONUNBUFFERED=1
pip_target() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$1" "${@:2}"; }
if ls .whl/*.whl >/dev/null 2>&1 && pip_target /tmp/site .whl/*.whl; then
    export PYTHONPATH=$PYTHONPATH:/tmp/site
    if ! python3 -c "import nvmath.bindings.cublasLt" 2>"$OUT/nvmath_import.txt" && ls .whl2/*.whl >/dev/null 2>&1 \
        && pip_target /tmp/site2 .whl2/*.whl; then
        export PYTHONPATH=$PYTHONPATH:/tmp/site2         # the machine's cuda-core is older than nvmath's
    fi
fi
{
    nvidia-smi -L
    python3 -m pip list 2>/dev/null | grep -iE "^(cupy|numpy|torch|jax|cuda-|nvmath|mpi4py) "
    python3 -c "import nvmath, nvmath.bindings.cublasLt; print('nvmath', nvmath.__version__)" 2>&1 | tail -1
} 2>&1 | tee "$OUT/env.txt"
section() {   # name, seconds, gpu_check arguments
    echo "### $1"
    timeout "$2" python3 bench/gpu_check.py "${@:3}" 2>&1 | tee "$OUT/$1.txt" | tail -40
}
section capture 180 --capture
section compile 180 --compile
echo "### profile"      # where an eager cuda step's host time goes: cProfile of 20 Transformer block steps
timeout 60 python3 - <<'PY' 2>&1 | tee "$OUT/profile.txt" | head -45
import cProfile, pstats, sys
sys.path.insert(0, "bench")
import gpu_check, tapelab
step = gpu_check._timed_step(tapelab, "Transformer block d128, batch 8x64", "cuda")
for _ in range(3):
    step()
tapelab.cuda.synchronize()
prof = cProfile.Profile()
prof.enable()
for _ in range(20):
    step()
tapelab.cuda.synchronize()
prof.disable()
pstats.Stats(prof).sort_stats("tottime").print_stats(30)
PY
section full "${GPU_FULL_SECONDS:-240}" --jobs 14
