#!/bin/sh
# tests/support/on_xvfb.sh WxH COMMAND...: runs COMMAND on a private Xvfb screen of WxH (24-bit) and exits with
# COMMAND's code. Xvfb picks a free display number itself (-displayfd) and says it when ready, so tests that drive
# the app can run side by side (xvfb-run -a can hand two of them the same number).
set -u
screen=$1
shift
dir=$(mktemp -d "${TMPDIR:-/tmp}/on_xvfb.XXXXXX") || exit 1
: >"$dir/display" # before Xvfb starts: the loop below reads it at once
Xvfb -displayfd 3 -screen 0 "${screen}x24" -nolisten tcp 3>"$dir/display" 2>"$dir/xvfb.log" &
xpid=$!
stop() { kill "$xpid" 2>/dev/null; wait "$xpid" 2>/dev/null; rm -rf "$dir"; }
trap 'stop; exit 143' TERM INT HUP
tries=0
while [ "$(wc -l <"$dir/display")" -lt 1 ]; do # the number and a newline, once Xvfb listens
  if ! kill -0 "$xpid" 2>/dev/null || [ $tries -ge 600 ]; then
    echo "on_xvfb.sh: Xvfb did not start: $(tail -3 "$dir/xvfb.log" | tr '\n' ' ')" >&2
    stop
    exit 1
  fi
  tries=$((tries + 1))
  sleep 0.1
done
DISPLAY=:$(cat "$dir/display") "$@"
rc=$?
stop
exit $rc
