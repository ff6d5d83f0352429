#!/usr/bin/env python3
"""Issue 52's check that every analysis is one entry: lists, per word, the files of app/gui whose code names it.

    tools/analysis_names.py [WORD ...]      # run from the repository root; default: circuit steer trace compare

Comments and string literals are stripped first, so only identifiers count (a script's "circuit" key or a
widget's name does not). A word counts in a file when an identifier there contains it, case-insensitively
(ANALYSIS_CIRCUIT, compute_circuit, p_steered). An analysis with files of its own should be named in at most 4:
its <name>_analysis.{h,cpp}, its panel and its rows in analysis_table.cpp (docs/development.md, "How to add an
analysis").

An identifier that holds the word inside another analysis's name counts for that one only: the Steer tab's
side-by-side continuations (its row "steer_compare", the core's gb::steer_compare and gb::compare_steering) are
steer's, not the comparison of two models; the Features tab's edit that adds a feature's decoder direction
(gb::FEATURE_STEER, beside FEATURE_ABLATE and FEATURE_CLAMP) is the Features tab's, not the Steer tab's. Those
names are listed in OTHERS.
"""
import collections
import os
import re
import sys


def strip(s):
    s = re.sub(r'/\*.*?\*/', '', s, flags=re.S)
    s = re.sub(r'//[^\n]*', '', s)
    s = re.sub(r'"(\\.|[^"\\])*"', '""', s)
    return s


# word -> the names holding it that belong to another analysis (an identifier containing one is not counted)
OTHERS = {'compare': ('steer_compare', 'compare_steering'), 'steer': ('feature_steer',)}

words = sys.argv[1:] or ['circuit', 'steer', 'trace', 'compare']
for w in words:
    files = collections.OrderedDict()
    for root, _, fs in os.walk('app/gui'):
        for f in sorted(fs):
            p = os.path.join(root, f)
            t = strip(open(p).read())
            ids = set(x for x in re.findall(r'[A-Za-z_][A-Za-z0-9_]*', t)
                      if w in x.lower() and not any(o in x.lower() for o in OTHERS.get(w, ())))
            if ids:
                files[p] = sorted(ids)
    print(f'== {w}: {len(files)}')
    for p, i in files.items():
        print('  ', p, ' '.join(i)[:150])
