#!/bin/sh
# Runs a program for help2man and passes its output on with the usage synopsis in the form help2man reads:
# one "Usage:" line and "  or:" lines. The app's --help wraps its synopsis over indented lines, which help2man
# would otherwise put into the description. Everything else passes unchanged.
#   usage-for-man.sh PROGRAM ARG...
out=$("$@") || exit
printf '%s\n' "$out" | awk '
  function flush() { if (syn != "") print syn; syn = "" }
  /^[Uu]sage: / { flush(); prog = $2; syn = "Usage: " substr($0, 8); insyn = 1; next }
  insyn && /^ +\[/ { sub(/^ +/, ""); syn = syn " " $0; next }                  # a wrapped synopsis line
  insyn && $1 == prog { flush(); sub(/^ +/, ""); syn = "  or:  " $0; next }  # another synopsis
  { flush(); insyn = 0; print }
  END { flush() }'
