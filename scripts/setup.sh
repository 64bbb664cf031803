#!/usr/bin/env bash
# Installs everything SAGE needs on a fresh Debian/Ubuntu machine, from the project's own files.
#   bash scripts/setup.sh          # the product: sandbox tools, CPU torch, embeddings, embedded local model
#   bash scripts/setup.sh --dev    # what the tests need: same, minus the local model, plus dev tools, triton and ray
# Safe to re-run: every step is skipped when already satisfied.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-full}"
PY="${PYTHON:-python3}"

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# 1. System packages: bubblewrap (the candidate sandbox) and libseccomp (its syscall filter).
if ! command -v bwrap >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "installing bubblewrap and libseccomp (apt)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap libseccomp2 >/dev/null
  else
    say "WARNING: bubblewrap is missing and cannot be installed here (need root + apt);"
    say "         candidates will run under the weaker fallback sandbox (rlimits + process group + unshare)."
  fi
fi

# 1b. (--dev) A PostgreSQL server for the shared-memory tests (tests/pg_support.py starts a throwaway
#     cluster from its binaries; nothing is served from the package's own default cluster).
if [ "$mode" = "--dev" ] || [ "$mode" = "dev" ]; then
  if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
      say "installing the PostgreSQL server (apt: postgresql)"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    else
      say "WARNING: PostgreSQL is missing and cannot be installed here (need root + apt); the shared-memory"
      say "         tests (-m postgres) will be skipped with that reason."
    fi
  fi
fi

# 2. PyTorch, CPU build. Only when torch is absent: an existing install is kept.
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  say "installing torch 2.13.0 (CPU build)"
  "$PY" -m pip install -q "torch==2.13.0"
fi

# 3. The package and its extras.
case "$mode" in
  --dev|dev) extras="dev,embed,sandbox,triton,ray,postgres" ;;
  full|--full) extras="embed,sandbox,local" ;;
  *) echo "usage: $0 [--dev]" >&2; exit 2 ;;
esac
if [ "$mode" != "--dev" ] && [ "$mode" != "dev" ] && ! "$PY" -c "import llama_cpp" >/dev/null 2>&1; then
  say "building llama-cpp-python from source: about 15 minutes on 2 cores (once)"
fi
# llama.cpp's -march=native build turns on its AMX path wherever the CPU lists AMX, and on virtual
# machines that list it without granting the tile state (seen here) the first decode dies with
# SIGSEGV in ggml_backend_amx_mul_mat. So: no native build, the vector extensions this CPU has.
if [ -z "${CMAKE_ARGS:-}" ]; then
  cpu_flags="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)"
  has() { case " $cpu_flags " in *" $1 "*) echo ON ;; *) echo OFF ;; esac; }
  export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=$(has avx) -DGGML_AVX2=$(has avx2) -DGGML_FMA=$(has fma) \
-DGGML_F16C=$(has f16c) -DGGML_AVX512=$(has avx512f) -DGGML_AVX512_VNNI=$(has avx512_vnni) \
-DGGML_AVX_VNNI=$(has avx_vnni) -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
fi
say "pip install -e .[$extras]"
CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$PY" -m pip install -q -e ".[$extras]"
say "done"
