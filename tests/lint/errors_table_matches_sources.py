#!/usr/bin/env python3
"""Checks docs/errors.md against the sources: every sentence in the nvdra
column of its tables must be built from string literals in src/ (tests
aside), so a reworded error that the table does not follow fails here.

A sentence is cut at its <placeholders> and at ": " (where an error is
wrapped around another); every piece of four characters or more, trimmed of
spaces and double quotes at its ends, must occur in one string literal of
src/, adjacent literals ("a " "b") joined as the compiler joins them.

Usage: errors_table_matches_sources.py <source root>
"""
import os
import re
import sys

LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
CHAR_LITERAL = re.compile(r"'(?:[^'\\\n]|\\.)'")
ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'"}


def unescape(s):
    return re.sub(r"\\(.)", lambda m: ESCAPES.get(m.group(1), m.group(1)), s)


def literals(text):
    """The file's string literals, adjacent ones joined."""
    text = CHAR_LITERAL.sub("' '", text)
    out, end = [], None
    for m in LITERAL.finditer(text):
        value = unescape(m.group(1))
        if end is not None and text[end:m.start()].strip() == "" and out:
            out[-1] += value
        else:
            out.append(value)
        end = m.end()
    return out


def corpus(root):
    strings = []
    for dirpath, _, files in os.walk(os.path.join(root, "src")):
        for f in files:
            if f.endswith((".cc", ".h")) and not f.endswith("_test.cc"):
                with open(os.path.join(dirpath, f), encoding="utf-8", errors="replace") as fh:
                    strings.extend(literals(fh.read()))
    return strings


def pieces(sentence):
    for part in re.split(r"<[^<>]+>", sentence):
        for piece in part.split(": "):
            piece = piece.strip(' "')
            if len(piece) >= 4:
                yield piece


def table_sentences(doc):
    """(line number, sentence) for every backticked span of the nvdra column."""
    out = []
    for n, line in enumerate(doc.splitlines(), 1):
        if not line.startswith("|") or line.startswith("| ---") or line.startswith("| Situation"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) != 3:
            out.append((n, None))
            continue
        spans = re.findall(r"`([^`]+)`", cells[1])
        if not spans:
            out.append((n, None))
        out.extend((n, s) for s in spans)
    return out


def missing(sentence, strings):
    return [p for p in pieces(sentence) if not any(p in s for s in strings)]


def main():
    root = sys.argv[1]
    with open(os.path.join(root, "docs", "errors.md"), encoding="utf-8") as f:
        doc = f.read()
    strings = corpus(root)
    rows = table_sentences(doc)
    failures = []
    if len(rows) < 40:
        failures.append("docs/errors.md: only %d sentences found in its tables" % len(rows))
    # The check itself can fail: a sentence that is nowhere in src/ is caught.
    if not missing("this sentence is in no <thing> of nvdra: nowhere at all", strings):
        failures.append("the check found a sentence that is in no source file")
    for n, sentence in rows:
        if sentence is None:
            failures.append("docs/errors.md:%d: a row without a backticked nvdra sentence" % n)
            continue
        gone = missing(sentence, strings)
        if gone:
            failures.append("docs/errors.md:%d: `%s`: not in src/: %s" % (n, sentence, "; ".join(map(repr, gone))))
    for f in failures:
        print(f)
    if failures:
        return 1
    print("%d sentences of docs/errors.md match the sources" % len(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
