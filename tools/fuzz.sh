#!/usr/bin/env bash
# Builds the libFuzzer targets (in the clang ASan + UBSan build, build-asan/, which tools/sanitize.sh completes)
# and runs each for N seconds (default 60), two at a time.
# Seeds: small valid files written here plus whatever the test suite left in build/test_tmp (tiny models in
# every format). Inputs that once crashed live in tests/fuzz/regressions/<target>/ and are replayed first.
#   tools/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}; shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_safetensors fuzz_config fuzz_gguf fuzz_llama2c fuzz_tokenizer_json fuzz_bpe fuzz_image)

bd=${FUZZ_BUILD_DIR:-build-asan} # another folder when several people fuzz in one tree
. tools/ccache.sh
. tools/asan_build.sh
asan_configure "$bd"
cmake --build "$bd" -j"$(nproc)" --target "${targets[@]}" >/dev/null
echo "fuzz.sh: the fuzzers' build took $((SECONDS / 60))m$((SECONDS % 60))s"

work=$bd/corpus
seed() { # seed TARGET FILE...
  mkdir -p "$work/$1"
  for f in "${@:2}"; do [ -f "$f" ] && cp "$f" "$work/$1/$(echo "${f#$tmp/}" | tr / -)" || true; done
}
tmp=build/test_tmp
seed fuzz_safetensors $(ls $tmp/*/model.safetensors 2>/dev/null | head -20)
seed fuzz_config $(ls $tmp/*/config.json 2>/dev/null | head -20) $(ls $tmp/*/hf/config.json 2>/dev/null | head -20) # hf/: every family
seed fuzz_gguf $(ls $tmp/*/*.gguf 2>/dev/null | head -20) $(ls $tmp/fam_*/model.gguf 2>/dev/null | head -20)
seed fuzz_tokenizer_json $(ls $tmp/*/tokenizer.json 2>/dev/null | head -20)
mkdir -p "$work/fuzz_llama2c" "$work/fuzz_bpe"
for f in $(ls $tmp/*/model.bin 2>/dev/null | head -5); do { printf '\x00'; cat "$f"; } > "$work/fuzz_llama2c/m-$(basename "$(dirname "$f")")"; done
# tokenizer seeds: \x01, the length of the text at the end (16), tokenizer.bin, the text
for f in $(ls $tmp/*/tokenizer.bin 2>/dev/null | head -5); do { printf '\x01\x10'; cat "$f"; printf 'Once upon a time'; } > "$work/fuzz_llama2c/t-$(basename "$(dirname "$f")")"; done
# image seeds: a settings header (even first byte) before the PNG/JPEG files the tests wrote; a config after \x01
mkdir -p "$work/fuzz_image"
for f in $(ls $tmp/*/*.png $tmp/*/*.jpg 2>/dev/null | head -10); do { printf '\x00\x10\x0c\x02\x35'; cat "$f"; } > "$work/fuzz_image/i-$(basename "$(dirname "$f")")-$(basename "$f")"; done
for f in $(ls $tmp/*/preprocessor_config.json $tmp/*/*/preprocessor_config.json 2>/dev/null | head -5); do { printf '\x01'; cat "$f"; } > "$work/fuzz_image/c-$(basename "$(dirname "$f")")"; done
printf 'The cat sat on the mat.' > "$work/fuzz_bpe/a"; printf 'caf\xc3\xa9 \xe6\x97\xa5\xf0\x9f\x99\x82' > "$work/fuzz_bpe/b"
for t in "${targets[@]}"; do mkdir -p "$work/$t"; [ -n "$(ls "$work/$t")" ] || printf 'x' > "$work/$t/empty"; done

run_one() {
  local t=$1 reg=tests/fuzz/regressions/$1
  if [ -d "$reg" ] && [ -n "$(ls "$reg")" ]; then "$bd/$t" "$reg"/* >"$bd/$t.regress.log" 2>&1 || { echo "FAIL $t: a regression input crashes again"; return 1; }; fi
  if "$bd/$t" -max_total_time="$secs" -print_final_stats=1 -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
      -artifact_prefix="$bd/$t-" "$work/$t" >"$bd/$t.log" 2>&1; then
    echo "ok   $t: $(grep -o 'stat::number_of_executed_units: [0-9]*' "$bd/$t.log" | tail -1 | awk '{print $2}') runs in ${secs}s, no crash"
  else
    echo "FAIL $t: see $bd/$t.log"; grep -m3 -E 'ERROR|SUMMARY' "$bd/$t.log" || true; return 1
  fi
}
fails=0
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  run_one "${targets[i]}" & p1=$!
  p2=""; if ((i + 1 < ${#targets[@]})); then run_one "${targets[i+1]}" & p2=$!; fi
  wait $p1 || fails=$((fails + 1))
  [ -z "$p2" ] || wait $p2 || fails=$((fails + 1))
done
echo "fuzz: ${#targets[@]} targets ran ${secs} s each; $fails crashed"
[ $fails -eq 0 ]
