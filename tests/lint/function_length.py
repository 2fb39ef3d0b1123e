#!/usr/bin/env python3
"""Lists functions in src/ (tests aside) longer than a limit.

A function is a brace block whose head (the text since the previous `;`,
`{` or `}` at the same level) ends in a parameter list, optionally followed
by qualifiers, a trailing return type or a constructor's initialiser list.
Namespace, class, struct, union, enum and extern blocks are descended into;
a function's own lambdas and local classes count towards it. Lines are
counted from the line of the function's name to its closing brace.

Usage: function_length.py [--max N] [--top K] [root]
Exit status 1 when a function is longer than --max (default 80).
"""
import argparse
import pathlib
import re
import sys

CONTAINER = re.compile(r'\b(namespace|class|struct|union|enum|extern)\b')


def strip(text):
    """Blanks comments, string and character literals, keeping newlines."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(''.join('\n' if ch == '\n' else ' ' for ch in text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ')' + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + ''.join('\n' for ch in text[i:j] if ch == '\n'))
            i = j
        elif c in '"\'':
            if c == "'" and i > 0 and (text[i - 1].isalnum()):  # digit separator 1'000
                out.append(' ')
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def is_function_head(head):
    h = head.strip()
    if not h or CONTAINER.search(h.split('(')[0]):
        return False
    if h.startswith('#') or '=' in h.split('(')[0] and not re.search(r'\boperator\s*=', h):
        return False
    # Drop a constructor's initialiser list, then qualifiers and a trailing
    # return type, and look for the closing parenthesis of the parameters.
    h = re.sub(r'\)\s*:\s[^{]*$', ')', h, flags=re.S)
    h = re.sub(r'(\b(const|override|final|noexcept|mutable|volatile)\b|&&|&|->[^)]*$|\s)+$', '', h)
    h = re.sub(r'\b(REQUIRES|EXCLUDES|ACQUIRE|RELEASE|NO_THREAD_SAFETY_ANALYSIS)\b\s*\([^)]*\)\s*$', '', h).rstrip()
    return h.endswith(')') and not re.match(r'^(if|for|while|switch|catch)\b', h)


def functions(path):
    text = strip(path.read_text(errors='replace'))
    results = []
    stack = []  # (kind, start offset of head, name line)
    head_start = 0
    i = 0
    while i < len(text):
        c = text[i]
        if c == '{':
            head = text[head_start:i]
            in_function = any(k == 'f' for k, _, _ in stack)
            if not in_function and is_function_head(head):
                name_at = head_start + len(head) - len(head.lstrip())
                m = re.search(r'([~\w:]+|operator\s*\S+)\s*\(', head)
                if m:
                    name_at = head_start + m.start()
                stack.append(('f', name_at, m.group(1) if m else '?'))
            else:
                stack.append(('b', i, ''))
            head_start = i + 1
        elif c == '}':
            if stack:
                kind, start, name = stack.pop()
                if kind == 'f':
                    first = text.count('\n', 0, start) + 1
                    last = text.count('\n', 0, i) + 1
                    results.append((last - first + 1, first, name))
            head_start = i + 1
        elif c == ';':
            head_start = i + 1
        i += 1
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--max', type=int, default=80)
    ap.add_argument('--top', type=int, default=0)
    ap.add_argument('root', nargs='?', default='src')
    a = ap.parse_args()
    rows = []
    for p in sorted(pathlib.Path(a.root).rglob('*')):
        if p.suffix not in ('.cc', '.h') or p.stem.endswith('_test') or 'testdata' in p.parts:
            continue
        if p.name.endswith('_test_util.h') or p.name in ('test_util.h',):
            continue
        for length, line, name in functions(p):
            rows.append((length, f'{p}:{line}', name))
    rows.sort(reverse=True)
    for length, where, name in rows[:a.top]:
        print(f'{length:5d}  {where}  {name}')
    over = [r for r in rows if r[0] > a.max]
    for length, where, name in over:
        print(f'{where}: {name} is {length} lines (at most {a.max})')
    if rows:
        print(f'longest: {rows[0][0]} lines ({rows[0][2]} at {rows[0][1]})')
    return 1 if over else 0


if __name__ == '__main__':
    sys.exit(main())
