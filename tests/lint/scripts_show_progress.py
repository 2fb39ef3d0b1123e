#!/usr/bin/env python3
"""scripts/test must never be silent for minutes: every step it runs says
so, and the filter it puts on the fuzz smoke runs lets ninja's progress
lines through while the fuzz tree builds (and the lines that say which
target runs and how it ended). Builds and ctest run under the heartbeat of
scripts/heartbeat.sh, whose lines the filter keeps too: a unity batch
compiles for a minute or more and ninja prints a line only when it ends.

Usage: scripts_show_progress.py [source root]   (default: the current directory)
"""
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "."
text = open(root + "/scripts/test").read()
bad = []

m = re.search(r"scripts/fuzz-smoke[^\n]*\|\s*\n?\s*grep[^']*'([^']+)'", text)
if not m:
    bad.append("scripts/test: no grep filter on scripts/fuzz-smoke found")
else:
    keep = re.compile(m.group(1))
    for line in ["[1/57] Building CXX object src/ledger/CMakeFiles/nvdra_ledger.dir/log_format.cc.o",
                 "[57/57] Linking CXX executable bin/ledger_decoder_fuzz",
                 "== ledger_decoder_fuzz", "stat::number_of_executed_units: 1234",
                 "==123== ERROR: AddressSanitizer: heap-buffer-overflow", "FAILED: fuzz/x.o",
                 "== fuzz build: 40 s; compiling nvdra_kube[unity 0], beast_transport.cc"]:
        if not keep.search(line):
            bad.append("scripts/test: the fuzz-smoke filter drops %r" % line)
for step in ["scripts/setup", "scripts/build", "scripts/fuzz-smoke", "ctest"]:
    if not re.search(r'step "[^"]*' + re.escape(step), text):
        bad.append("scripts/test: no progress line before %s" % step)

for script, command in [("scripts/build", "cmake --build"), ("scripts/fuzz-smoke", "ninja -C"),
                        ("scripts/test", "ctest")]:
    body = open(root + "/" + script).read()
    if not re.search(r"^heartbeat [^\n]*" + re.escape(command), body, re.M):
        bad.append("%s: %s does not run under heartbeat (scripts/heartbeat.sh)" % (script, command))

for b in bad:
    print(b)
sys.exit(1 if bad else 0)
