#!/bin/sh
# Remakes the screenshots (README.md, docs/) of the embedded default model (docs/images/*.png) with the app's script mode, so
# they stay true after the model or the UI changes:  tools/screenshots.sh [BUILD_DIR] (default build/).
# The heads shown are the model's own best ones (glassbox-cli heads), not fixed numbers.
# Not remade here: docs/images/screenshot-experts.png (a random Qwen2-MoE, see docs/app.md, Experts).
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
app="$build/glassbox"
cli="$build/glassbox-cli"
[ -x "$app" ] && [ -x "$cli" ] || { echo "screenshots: build first (tools/build.sh): $app or $cli is missing" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

prompt="The cat sat on the mat. The cat sat on the"
ioi="When Mary and John went to the store, John gave a drink to"
ioi_swap="When John and Mary went to the store, Mary gave a drink to"   # the names swapped: patching's corrupt
# best head of a kind: "heads" prints "induction  L.H score  L.H score ..." (highest first)
best() { "$cli" heads "$@" | awk -v k="$kind" '$1 == k { print $2; exit }'; }
kind=induction; induction=$(best --repeat-random 50 --seed 1)
kind=prev_token; prev=$(best --prompt "$prompt")
echo "best induction head $induction, previous-token head $prev"

# shot NAME HEAD PROMPT SCRIPT-LINES...: one window (SIZE, default 1600x1000, at SCALE, default 1), the script's
# lines, then the screenshot
shot() {
    name=$1 head=$2 text=$3
    shift 3
    : > "$tmp/$name.txt"
    for line in "$@"; do echo "$line" >> "$tmp/$name.txt"; done
    printf 'wait\nframes 5\nscreenshot %s\n' "docs/images/$name.png" >> "$tmp/$name.txt"
    xvfb-run -a -s "-screen 0 1920x1080x24" "$app" --prompt "$text" --select-head "$head" --size "${SIZE:-1600x1000}" \
        --ui-scale "${SCALE:-1}" --script "$tmp/$name.txt" > "$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log" >&2; exit 1; }
    echo "docs/images/$name.png"
}

shot screenshot "$prev" "$prompt" "wait"
shot screenshot-live "$prev" "$prompt" "wait" "gen-tokens 8" "click Generate" "wait" "frames 30" "wait" "gen-step 5"
shot screenshot-lens "$induction" "$prompt" "tab lens"
shot screenshot-attribution "$induction" "$prompt" "tab attribution"
shot screenshot-patching "$induction" "$ioi" "tab patching" "corrupt $ioi_swap"
shot screenshot-head-scores "$prev" "$prompt" "colour-by prev_token"
# the demos as a class sees them: 1280 x 720 at 100 % (NAME.png), 1920 x 1080 at 150 % (NAME-1080p.png) and
# 1280 x 720 presenting (NAME-present.png)
for size in 1280x720:1: 1920x1080:1.5: 1280x720:1:present; do
    SIZE=${size%%:*} rest=${size#*:} SCALE=${rest%%:*} mode=${rest#*:}
    sfx=$([ "$SIZE" = 1280x720 ] && echo "" || echo "-1080p")
    pre="frames 1" # (a script line that changes nothing)
    if [ "$mode" = present ]; then sfx="-present" pre="present on"; fi
    export SIZE SCALE
    for d in induction prev-token lens ioi; do
        shot "screenshot-demo-$d$sfx" "$induction" "$prompt" "wait" "$pre" "demo $d"
    done
    # Break it on its third row (no residual), the caption's numbers in view
    shot "screenshot-demo-break$sfx" "$induction" "$prompt" "wait" "$pre" "demo break-it" "wait" "click break next" "wait" \
        "click break next" "wait" "hover demo caption"
    shot "screenshot-demo-temperature$sfx" "$induction" "$prompt" "wait" "$pre" "demo temperature" "wait" "hover demo caption"
    # Learn's picture, stepped to the head's causal mask
    [ "$mode" = present ] || shot "screenshot-learn$sfx" "$induction" "$prompt" "tab learn" "wait" "frames 5" "key right" \
        "key right" "key right" "key right" "key right"
done

# The research views at 1280 x 720, the Analysis panel filling the window (as docs/interpretability.md,
# docs/steering.md and docs/compare.md show them): the IOI circuit, causal tracing of the Eiffel Tower, steering
# with its sweep, a feature of the shipped SAE, and the default model against its own Q4_K copy.
SIZE=1280x720 SCALE=1
export SIZE SCALE
shot circuit "$induction" "$ioi" "tab patching" "corrupt $ioi_swap" \
    "wait" "tab circuit" "maximise analysis" "wait" "frames 10" "wait"
shot trace "$induction" "The Eiffel Tower is in the city of" "tab patching" "patch-mode trace" "subject Eiffel Tower" \
    "maximise analysis" "wait" "frames 10" "wait"
shot steer "$induction" "Today I feel" "tab steer" "maximise analysis" "wait" "click steer build" "wait" \
    "click steer apply" "wait" "frames 10" "wait"
# the shipped SAE (opened with the default model): feature 685, the subject named again in an indirect-object sentence,
# with its top contexts over the excerpt of the model's training text that the tests use
shot screenshot-features "$induction" "$ioi" "tab features" "maximise analysis" "wait" "feature 685" \
    "feature-corpus tests/data/default_model_text.txt" "wait" "click feature index" "wait" "frames 10" "wait"
"$cli" quantize --dtype Q4_K --out "$tmp/default-Q4_K.gguf" > /dev/null
shot compare "$induction" "The cat sat on the mat because it was tired. Then the dog came in and looked at the cat" \
    "open-b $tmp/default-Q4_K.gguf" "wait" "frames 10" "wait" "compare-view avsb" "tab lens" "wait" "frames 10" "wait"

# The model picker (docs/app.md, Opening a model) at 1280 x 720, over a HOME of its own: the default model in the
# Hugging Face cache's layout, its Q4_K copy pulled by Ollama and kept by LM Studio, and a file that is no model
pick="$tmp/home"
hub="$pick/.cache/huggingface/hub/models--glassbox--tiny-en" commit=0123456789abcdef0123456789abcdef01234567
mkdir -p "$hub/blobs" "$hub/refs" "$hub/snapshots/$commit"
printf %s "$commit" > "$hub/refs/main"
for f in config.json model.safetensors vocab.json merges.txt; do
    sum=$(sha256sum "assets/models/glassbox-tiny-en/$f" | cut -c1-64)
    cp "assets/models/glassbox-tiny-en/$f" "$hub/blobs/$sum"
    ln -s "../../blobs/$sum" "$hub/snapshots/$commit/$f"
done
ollama="$pick/.ollama/models" sum=$(sha256sum "$tmp/default-Q4_K.gguf" | cut -c1-64)
mkdir -p "$ollama/blobs" "$ollama/manifests/registry.ollama.ai/library/glassbox-tiny"
cp "$tmp/default-Q4_K.gguf" "$ollama/blobs/sha256-$sum"
printf '{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:%s","size":%s}]}' \
    "$sum" "$(wc -c < "$tmp/default-Q4_K.gguf")" > "$ollama/manifests/registry.ollama.ai/library/glassbox-tiny/q4_k"
mkdir -p "$pick/.lmstudio/models/glassbox/tiny-GGUF"
cp "$tmp/default-Q4_K.gguf" "$pick/.lmstudio/models/glassbox/tiny-GGUF/glassbox-tiny-Q4_K.gguf"
head -c 4096 /dev/urandom > "$pick/.lmstudio/models/glassbox/tiny-GGUF/notes.gguf"
(
    unset HF_HUB_CACHE HUGGINGFACE_HUB_CACHE HF_HOME XDG_CACHE_HOME OLLAMA_MODELS LLAMA_CACHE
    HOME=$pick
    export HOME
    shot model_picker "$induction" "$prompt" "wait" "picker machine" "picker-wait" "frames 5"
)
