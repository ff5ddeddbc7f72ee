#!/usr/bin/env bash
# The GPU check (issue 45): one prepared script for a machine with an NVIDIA GPU and no network.
#
#   scripts/gpu_check.sh             # on the GPU machine: build, install, check, measure, print one table
#   scripts/gpu_check.sh --dry-run   # anywhere (CPU): the same steps on a tiny model, no build, a pretend 8 GiB card
#
# What it carries in: .gpu-bundle/ (git-ignored) with
#   llama_cpp_python-<version>.tar.gz   the sdist (llama.cpp's sources) to build the CUDA wheel from, unless
#   wheels/*.whl                        wheels to install first: the build tools (scikit-build-core, cmake, ninja),
#                                       gguf; wheels/cuda-smNN/ holds the CUDA llama_cpp_python wheel built for a
#                                       card of compute capability NN (found there: nothing is built)
# `scripts/gpu_check.sh --bundle` fills .gpu-bundle/ where pip works (the cached sdist, `pip download` of those).
#
# Steps: (1) the card (nvidia-smi: name, compute capability, free memory, bandwidth from the name); (2) the
# CUDA wheel: `pip wheel` of the sdist with CMAKE_ARGS for this card only, FlashAttention kernels off
# (-DGGML_CUDA_FA=OFF: the build takes minutes instead of most of an hour), installed with --no-deps;
# (3) a synthetic Mistral-7B-shaped Q4_0 GGUF (scripts/synthetic_gguf.py: random weights, the embedded
# vocabulary); (4) `hermes-local doctor --gpu`; (5) `hermes-local run ... --n-gpu-layers -1 --tool-choice
# required` and the same with `--n-gpu-layers auto --n-ctx auto`; (6) scripts/bench.py --only speed with
# --bandwidth; (7) scripts/gpu_task.py: the 8-step task GPU vs CPU, the draft model's identity and speed.
# Every step's output goes to $OUT (default .gpu-bundle/out); the table at the end reads it. A step that fails
# is shown as failed in the table, and the script goes on; the exit code is 1 if any failed.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="${GPU_BUNDLE:-$ROOT/.gpu-bundle}"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
OUT="${OUT:-$BUNDLE/out}"
PY="${PYTHON:-python}"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$PATH:/usr/local/cuda/bin"  # nvcc, where the CUDA toolkit usually lives
TOOLS="gguf scikit-build-core pathspec packaging cmake ninja"  # what building the wheel and the check need
DRY=0
case "${1:-}" in
    --dry-run) DRY=1 ;;
    --bundle)
        mkdir -p "$BUNDLE/wheels"
        SDIST="${XDG_CACHE_HOME:-$HOME/.cache}/hermes-local/llama.cpp-$VERSION/src/llama_cpp_python-$VERSION.tar.gz"
        [[ -f "$SDIST" ]] || "$PY" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$BUNDLE"
        [[ -f "$SDIST" ]] && cp "$SDIST" "$BUNDLE/"
        "$PY" -m pip download --quiet --no-deps --only-binary :all: -d "$BUNDLE/wheels" $TOOLS || true
        ls -la "$BUNDLE" "$BUNDLE/wheels"
        exit 0 ;;
    "") ;;
    *) echo "usage: scripts/gpu_check.sh [--dry-run|--bundle]" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
rm -f "$OUT"/*.status
export HERMES_LOCAL_HOME="${HERMES_LOCAL_HOME:-$OUT/home}"
WORK="$OUT/work"
mkdir -p "$WORK"
START=$(date +%s)

step() {  # step NAME COMMAND...: run, keep its output in $OUT/NAME.log, record ok/failed
    local name="$1"; shift
    echo "== $name: $*" >&2
    local t0=$(date +%s)
    if "$@" >"$OUT/$name.log" 2>&1; then echo "ok $(( $(date +%s) - t0 ))s" >"$OUT/$name.status"
    else echo "failed (exit $?) $(( $(date +%s) - t0 ))s" >"$OUT/$name.status"; tail -n 5 "$OUT/$name.log" >&2; fi
}

# (1) the card
if (( DRY )); then
    export HERMES_LOCAL_DEVICE_FREE_MB=8192  # what auto would choose on an 8 GiB card (no build offloads here)
    echo "dry run: no GPU, pretend 8192 MiB free" >"$OUT/card.log"
    CC="" BANDWIDTH=0 SHAPE=tiny STEPS=2
else
    nvidia-smi --query-gpu=name,compute_cap,memory.total,memory.free --format=csv,noheader >"$OUT/card.log" 2>&1 \
        || { echo "error: nvidia-smi failed; is this a GPU machine? (scripts/gpu_check.sh --dry-run elsewhere)" >&2; exit 2; }
    CC="$(head -n1 "$OUT/card.log" | cut -d, -f2 | tr -d ' .')"
    case "$(head -n1 "$OUT/card.log")" in  # device memory bandwidth, GB/s (the decode ceiling's numerator)
        *H200*) BANDWIDTH=4800 ;; *H100*SXM*|*"H100 80GB HBM3"*) BANDWIDTH=3350 ;; *H100*) BANDWIDTH=2000 ;;
        *A100*) BANDWIDTH=2039 ;; *L40S*) BANDWIDTH=864 ;; *4090*) BANDWIDTH=1008 ;; *) BANDWIDTH=0 ;;
    esac
    SHAPE=7b STEPS=8
fi

# (2) the CUDA wheel: carried, else built from the sdist for this card (build tools from the carried wheels)
install_deps() {  # the build tools and gguf, from the carried wheels, where this machine lacks them
    local need="gguf scikit-build-core pathspec packaging"
    command -v cmake >/dev/null || need="$need cmake"
    command -v ninja >/dev/null || need="$need ninja"
    "$PY" -m pip install --no-deps --no-index --find-links "$BUNDLE/wheels" $need
}
build_wheel() {
    local sdist; sdist="$(ls "$BUNDLE"/llama_cpp_python-*.tar.gz 2>/dev/null | head -n1)"
    [[ -n "$sdist" ]] || { echo "no sdist in $BUNDLE (scripts/gpu_check.sh --bundle where pip works)"; return 2; }
    export CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=${CC:-90} -DGGML_CUDA_FA=OFF -DGGML_NATIVE=OFF"
    export CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
    "$PY" -m pip wheel --no-deps --no-build-isolation -w "$CUDA_WHEELS" "$sdist"  # the card's own folder
}
install_cuda_wheel() {
    "$PY" -m pip install --no-deps --no-index --force-reinstall "$CUDA_WHEELS"/llama_cpp_python-*.whl
}
if (( DRY )); then
    echo "dry run: would run CMAKE_ARGS='-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=<cc> -DGGML_CUDA_FA=OFF" \
         "-DGGML_NATIVE=OFF' pip wheel --no-deps --no-build-isolation <sdist>" >"$OUT/build.log"
    echo "skipped (dry run)" >"$OUT/build.status"
else
    step deps install_deps
    CUDA_WHEELS="$BUNDLE/wheels/cuda-sm$CC"
    if ! ls "$CUDA_WHEELS"/llama_cpp_python-*.whl >/dev/null 2>&1; then step build build_wheel; fi
    step install install_cuda_wheel
fi

# (3) the model: a synthetic 7B (random weights) on the GPU, a tiny one in the dry run
MODEL="$WORK/synthetic-$SHAPE.Q4_0.gguf"
[[ -f "$MODEL" ]] || step model "$PY" "$ROOT/scripts/synthetic_gguf.py" "$MODEL" --shape "$SHAPE"
HL=("$PY" -m hermes_local)

# (4) doctor --gpu (a CPU-only build exits 1: expected in the dry run)
step doctor "${HL[@]}" doctor --gpu --model "$MODEL" --workspace "$WORK" $( (( DRY )) && echo --no-speed )
# (5) runs: every layer, then auto
TASK="What time is it? Note the time in my memo."
ran() { "$@"; local rc=$?; (( rc == 0 || rc == 3 )); }  # exit 3: the step limit (random weights never finish)
step run_gpu ran "${HL[@]}" run "$TASK" --model "$MODEL" --n-gpu-layers -1 --tool-choice required --max-steps 3 \
    --yes --workspace "$WORK" --no-memory --json
step run_auto ran "${HL[@]}" run "$TASK" --model "$MODEL" --n-gpu-layers auto --n-ctx auto --tool-choice required \
    --max-steps 2 --yes --workspace "$WORK" --no-memory
# the crash of issue 45 (SIGSEGV in std::regex resolved into libggml-cuda.so): which C++ runtime symbols the CUDA
# library exports (a weak std:: definition there can interpose on libstdc++'s), its CUDA runtime linkage, and, when
# a run crashed, the dynamic linker's bindings of std:: symbols to it during a run without the pre-flight child
narrow() {
    local lib; lib="$("$PY" -c 'import llama_cpp, pathlib; print(pathlib.Path(llama_cpp.__file__).parent / "lib")')"
    echo "cuda lib: $(ls "$lib"/libggml-cuda.so* 2>/dev/null | head -n1)"
    echo "std symbols exported: $(nm -D --defined-only "$lib"/libggml-cuda.so 2>/dev/null | grep -c ' _ZNSt' || true)"
    echo "cudart: $(ldd "$lib"/libggml-cuda.so 2>/dev/null | grep -o 'libcudart[^ ]*' | head -n1 || echo static)"
    if grep -q "crashed (SIG" "$OUT/run_gpu.log" 2>/dev/null; then
        HERMES_LOCAL_PREFLIGHT=off LD_DEBUG=bindings LD_DEBUG_OUTPUT="$OUT/bindings" "${HL[@]}" run "$TASK" \
            --model "$MODEL" --n-gpu-layers -1 --max-steps 1 --workspace "$WORK" --no-memory >/dev/null 2>&1
        echo "run without pre-flight: exit $?"
        echo "std bindings into libggml-cuda: $(cat "$OUT"/bindings.* 2>/dev/null | grep 'libggml-cuda' | grep -c '_ZNSt' || true)"
        cat "$OUT"/bindings.* 2>/dev/null | grep 'libggml-cuda' | grep '_ZNSt' | head -n 5
    fi
}
(( DRY )) || step narrow narrow

# (6) bench speed sections, (7) task GPU vs CPU and the draft model (the embedded SmolLM2 drafts: same vocabulary)
if (( DRY )); then
    echo "skipped (dry run: timings on a CPU mean nothing here)" >"$OUT/bench.status"
    step task "$PY" "$ROOT/scripts/gpu_task.py" --model "$MODEL" --n-gpu-layers 0 --steps "$STEPS" --n-ctx 2048 \
        --max-tokens 8 --only task
else
    step bench "$PY" "$ROOT/scripts/bench.py" --model "$MODEL" --n-gpu-layers -1 --only speed \
        --bandwidth "$BANDWIDTH" --json "$OUT/bench.json"
    step task timeout 420 "$PY" "$ROOT/scripts/gpu_task.py" --model "$MODEL" --n-gpu-layers -1 --steps "$STEPS"
    step draft "$PY" "$ROOT/scripts/gpu_task.py" --n-gpu-layers -1 --only draft
fi

# the table
"$PY" - "$OUT" "$(( $(date +%s) - START ))" "$DRY" <<'EOF'
import json, re, sys
from pathlib import Path

out, total, dry = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
def read(name):
    p = out / name
    return p.read_text(errors="replace") if p.exists() else ""
def grab(text, pattern, default="-"):
    m = re.search(pattern, text)
    return m.group(1).strip() if m else default
def last_json(text):
    start = text.find("{")
    try:
        return json.loads(text[start:]) if start >= 0 else {}
    except ValueError:
        return {}
rows = [("card", read("card.log").strip().splitlines()[0] if read("card.log").strip() else "-")]
for name in ("deps", "build", "install", "model", "doctor", "run_gpu", "run_auto", "narrow", "bench", "task", "draft"):
    status = read(f"{name}.status").strip()
    if status:
        rows.append((f"step {name}", status))
doctor = read("doctor.log")
rows += [("doctor gpu build", grab(doctor, r"gpu build:\s*(.*)")),
         ("doctor auto fit", grab(doctor, r"auto fit:\s*(.*)")),
         ("doctor gpu speed", grab(doctor, r"gpu speed:\s*(.*)")),
         ("doctor gpu vs cpu", grab(doctor, r"gpu vs cpu:\s*(.*)")),
         ("doctor problem", grab(doctor, r"problem:\s*(.*)", "none"))]
for name in ("run_gpu", "run_auto"):
    log = read(f"{name}.log")
    data = last_json(log)
    if data:
        calls = data.get("tool_calls") or []
        valid = sum(1 for c in calls if c.get("error_kind") not in ("invalid_arguments", "truncated"))
        rows.append((name, f"stopped {data.get('stopped', '-')}, well-formed calls {valid}/{len(calls)}"))
    else:
        rows.append((name, grab(log, r"(fit: .*?n_ctx \d+\))", "no fit line")))
for line in read("narrow.log").splitlines()[:8]:
    key, _, value = line.partition(": ")
    rows.append((f"narrow {key}", value))
bench = read("bench.log")
for label in ("ceiling prompt tok/s (512)", "ceiling decode tok/s", "decode share of the bandwidth ceiling"):
    rows.append((label, grab(bench, re.escape(label) + r"\s+(.*)")))
task = last_json(read("task.log"))
for arm in ("task_gpu", "task_cpu"):
    t = task.get(arm) or {}
    if t:
        rows.append((arm, f"wall {t['wall_s']:.2f}s, evaluated/new {t['evaluated_over_new']:.3f}, "
                          f"valid calls {t['tool_calls_valid']}/{t['tool_calls']}, decode {t.get('decode_tps', 0):.1f} tok/s"))
if "task_cpu_over_gpu" in task:
    rows.append(("task wall CPU / GPU", f"{task['task_cpu_over_gpu']:.2f}x"))
draft = last_json(read("draft.log")).get("draft") or {}
for kernels, d in draft.items():
    rows.append((f"draft {kernels}", f"identical {d['identical']}, kept {d['kept']:.0%}, speed-up {d['speedup']:.2f}x"))
rows.append(("total time", f"{total}s" + (" (dry run)" if dry else "")))
width = max(len(k) for k, _ in rows)
print("\n".join(f"{k.ljust(width)}  {v}" for k, v in rows))
EOF
failed=0
for f in "$OUT"/*.status; do
    grep -q failed "$f" || continue
    (( DRY )) && [[ "$(basename "$f")" == doctor.status ]] && continue  # a CPU-only build: doctor --gpu says so
    failed=1
done
exit "$failed"
