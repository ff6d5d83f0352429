#!/usr/bin/env python3
"""Issue 52's size limits: every source file of core/, app/ and tests/ at most 800 lines, every function at most 120.

    tools/check_sizes.py [--files N] [--functions N] [DIR ...]   # from the repository root; exit 1 on an offender

Prints each offender as `path:line: what (N lines)`. A function is a brace block at namespace or class scope whose
header ends in a parameter list (with its qualifiers, a trailing return type or a constructor's initializer list):
free functions, member functions defined in or out of their class, gtest's TEST bodies. Its length runs from the
first line of its header to its closing brace. Lambdas and blocks inside a function are part of it. Comments, string
and character literals and preprocessor lines are blanked first (line breaks kept), so braces in them do not count. Files under a folder
named third_party, vendor or build are skipped.
"""
import argparse
import os
import re
import sys

EXTS = ('.cpp', '.h', '.hpp', '.cc', '.c')
SKIP = {'third_party', 'vendor', 'build', 'node_modules'}


def blank(src):
    """src with comments and string/char literals replaced by spaces, newlines kept (line numbers hold)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', src[i:j]))
            i = j
        elif src.startswith('R"', i) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == '_')):
            m = re.match(r'R"([^(\s]*)\(', src[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = src.find(')' + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r'[^\n]', ' ', src[i:j]))
            i = j
        elif c in '"\'':
            if c == "'" and i > 0 and src[i - 1].isalnum():  # a digit separator (1'000'000)
                out.append(' ')
                i += 1
                continue
            j = i + 1
            while j < n and src[j] != c and src[j] != '\n':
                j += 2 if src[j] == '\\' else 1
            j = min(j + 1, n)
            out.append(' ' * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    # preprocessor lines (with their continuations) too: an #include is no part of the function after it
    return re.sub(r'(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*', lambda m: re.sub(r'[^\n]', ' ', m.group(0)), ''.join(out))


FUNC_TAIL = re.compile(r'\)\s*(const|noexcept|override|final|mutable|&|&&|\s)*(->\s*[\w:<>,\s\*&]+)?\s*$')
CTOR_INIT = re.compile(r'\)\s*(noexcept\s*)?:\s*[\w:]+\s*[({]')
SCOPE = re.compile(r'\b(namespace|struct|class|union|enum)\b[^;()]*$|extern\s*$')


def functions(text):
    """(first line, last line, header) of each function in blanked text."""
    found = []
    stack = []  # 'scope' (namespace, class, top) or 'body' (inside a function) or 'init' (braces in an init list)
    start = 0   # where the text before the next brace at scope level starts
    line_of = lambda pos: text.count('\n', 0, pos) + 1
    depth_body = None
    i = 0
    while i < len(text):
        c = text[i]
        if c in ';':
            if not stack or stack[-1] == 'scope':
                start = i + 1
        elif c == '{':
            if stack and stack[-1] != 'scope':
                stack.append('inner')
            else:
                head = text[start:i]
                h = head.strip()
                if SCOPE.search(h) or h.endswith('=') or h == '' or h.endswith(','):
                    kind = 'scope' if SCOPE.search(h) or h == '' else 'inner'
                    stack.append(kind)
                elif FUNC_TAIL.search(h) or (CTOR_INIT.search(h) and re.search(r'[)}]\s*$', h)):
                    first = start + len(head) - len(head.lstrip())
                    stack.append('body')
                    depth_body = (len(stack), first, h)
                else:
                    stack.append('inner')
            start = i + 1
        elif c == '}':
            if stack:
                if depth_body and len(stack) == depth_body[0]:
                    found.append((line_of(depth_body[1]), line_of(i), depth_body[2]))
                    depth_body = None
                stack.pop()
            if not stack or stack[-1] == 'scope':
                start = i + 1
        i += 1
    return found


def name_of(header):
    h = re.sub(r'\s+', ' ', header)
    m = re.search(r'([~\w:]+(?:operator\s*\S+)?)\s*\((?!.*\(\s*[^)]*\)\s*\()', h)
    return m.group(1) if m else h[:60]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--files', type=int, default=800)
    ap.add_argument('--functions', type=int, default=120)
    ap.add_argument('dirs', nargs='*', default=['core', 'app', 'tests'])
    a = ap.parse_args()
    bad = 0
    for d in a.dirs:
        for root, dirs, files in os.walk(d):
            dirs[:] = sorted(x for x in dirs if x not in SKIP)
            for f in sorted(files):
                if not f.endswith(EXTS):
                    continue
                p = os.path.join(root, f)
                src = open(p, encoding='utf-8', errors='replace').read()
                n = src.count('\n') + (0 if src.endswith('\n') or not src else 1)
                if n > a.files:
                    print(f'{p}:1: file ({n} lines)')
                    bad += 1
                for first, last, header in functions(blank(src)):
                    if last - first + 1 > a.functions:
                        print(f'{p}:{first}: {name_of(header)} ({last - first + 1} lines)')
                        bad += 1
    if bad:
        print(f'{bad} over the limits (files {a.files}, functions {a.functions} lines)', file=sys.stderr)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
