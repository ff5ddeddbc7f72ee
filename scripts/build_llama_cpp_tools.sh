#!/usr/bin/env bash
# Build llama.cpp's `llama-server` and `rpc-server` (with the RPC backend) from the llama.cpp sources
# that ship inside the llama-cpp-python sdist, once per machine, into a cache folder keyed by the
# llama-cpp-python version:
#
#     ${XDG_CACHE_HOME:-~/.cache}/hermes-local/llama.cpp-<version>/bin/{llama-server,rpc-server}
#
# plus, next to them, the Hermes 2 Pro tool_use chat template from the same sources (bin/templates/), which
# scripts/bench.py gives llama-server --jinja for its OpenAI-style peer loop.
#
# The LAST line printed is that bin folder (`BIN=$(scripts/build_llama_cpp_tools.sh | tail -n1)`).
# A second run finds the binaries and only prints the folder. hermes_local.engines.binaries.tools_dir()
# computes the same folder, so tests and `doctor` find what this script built.
#
# Source of the sources, in order: $LLAMA_CPP_SRC (a llama.cpp tree), an sdist already unpacked in the
# cache folder, or `pip download --no-deps --no-binary :all: llama-cpp-python==<version>` (network, once).
# Configured offline: no libcurl, no web-UI download (LLAMA_USE_PREBUILT_UI=OFF), no tests/examples;
# static binaries so the bin folder can be copied; only the two targets, -j${JOBS:-2}.
# It does not build an RPC-enabled llama-cpp-python wheel: the RPC split runs through llama-server --rpc
# (for the in-process route: CMAKE_ARGS="-DGGML_RPC=ON" pip install --no-binary :all: llama-cpp-python).
set -euo pipefail

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/hermes-local/llama.cpp-${VERSION}"
BIN="$ROOT/bin"
JOBS="${JOBS:-2}"
TEMPLATE="NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja"
# Portable x86 code: these VMs report AMX in cpuid without enabling it, so -march=native binaries die with
# "Illegal instruction" on batched prompts. The flags are stamped next to the binaries; other flags rebuild.
CPU_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON)
STAMP="${CPU_FLAGS[*]}"

if [[ -x "$BIN/llama-server" && -x "$BIN/rpc-server" && -f "$BIN/templates/$TEMPLATE" \
      && "$(cat "$BIN/cpu-flags" 2>/dev/null)" == "$STAMP" ]]; then
    echo "llama.cpp tools already built for llama-cpp-python $VERSION" >&2
    echo "$BIN"
    exit 0
fi

if ! command -v cmake >/dev/null 2>&1; then
    if [[ "$(id -u)" == "0" ]] && command -v apt-get >/dev/null 2>&1; then
        echo "installing cmake (apt-get)" >&2
        apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake >&2
    else
        echo "error: cmake is missing; install it (e.g. sudo apt-get install cmake) and re-run" >&2
        exit 2
    fi
fi

mkdir -p "$ROOT"
SRC="${LLAMA_CPP_SRC:-}"
if [[ -z "$SRC" ]]; then
    SRC="$ROOT/src/llama_cpp_python-${VERSION}/vendor/llama.cpp"
    if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
        echo "fetching the llama-cpp-python $VERSION sdist (llama.cpp sources)" >&2
        mkdir -p "$ROOT/src"
        python -m pip download --quiet --no-deps --no-binary :all: \
            "llama-cpp-python==${VERSION}" -d "$ROOT/src" >&2
        tar -xzf "$ROOT/src/llama_cpp_python-${VERSION}.tar.gz" -C "$ROOT/src"
    fi
fi
if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
    echo "error: no llama.cpp sources at $SRC" >&2
    exit 2
fi

GEN=()
if command -v ninja >/dev/null 2>&1; then
    GEN=(-G Ninja)
fi

BUILD="$ROOT/build"
# A build folder configured from another source tree (e.g. an earlier LLAMA_CPP_SRC) cannot be reused.
if [[ -f "$BUILD/CMakeCache.txt" ]] && ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$SRC" "$BUILD/CMakeCache.txt"; then
    rm -rf "$BUILD"
fi
start=$(date +%s)
echo "configuring llama.cpp from $SRC" >&2
cmake -S "$SRC" -B "$BUILD" "${GEN[@]}" \
    -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF \
    -DGGML_RPC=ON \
    "${CPU_FLAGS[@]}" \
    -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_TOOLS=ON >&2
echo "building llama-server and rpc-server with -j$JOBS" >&2
cmake --build "$BUILD" --config Release -j "$JOBS" --target llama-server ggml-rpc-server >&2

mkdir -p "$BIN.tmp/templates"
cp "$BUILD/bin/llama-server" "$BIN.tmp/llama-server"
cp "$BUILD/bin/ggml-rpc-server" "$BIN.tmp/rpc-server"
cp "$SRC/models/templates/$TEMPLATE" "$BIN.tmp/templates/$TEMPLATE"
echo "$STAMP" > "$BIN.tmp/cpu-flags"
rm -rf "$BIN"
mv "$BIN.tmp" "$BIN"
echo "built in $(( $(date +%s) - start )) s" >&2
echo "$BIN"
