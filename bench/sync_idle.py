#!/usr/bin/env python3
"""How much an append with fdatasync costs after an idle stretch.

Appends one 200-byte record and syncs it, 300 times a point, with nothing,
a sleep or a busy spin of the given length before each, and prints the
p50 of the sync per point, three rounds each. On virtual machines a flush
that follows an idle CPU or an idle disk is often markedly slower than one
right after the last; the node benchmark's floor measures both
(docs/benchmarks.md, "The floor paced, and a lighter client").

Usage:  python3 bench/sync_idle.py [directory]   (default TMPDIR)
"""
import os
import statistics
import sys
import tempfile
import time

RECORD = b"x" * 200
COUNT = 300


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def p50(fd, idle, busy):
    times = []
    for _ in range(COUNT):
        if idle:
            if busy:
                spin(idle)
            else:
                time.sleep(idle)  # the idle stretch being measured, not synchronisation
        os.write(fd, RECORD)
        t0 = time.perf_counter()
        os.fdatasync(fd)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir()
    fd, path = tempfile.mkstemp(prefix="sync-idle-", dir=directory)
    try:
        print("append %d B + fdatasync p50 in %s, ms (three rounds of %d)" % (len(RECORD), directory, COUNT))
        for idle in (0, 0.0005, 0.001, 0.002, 0.005):
            for busy in ((False, True) if idle else (False,)):
                rounds = ["%.3f" % p50(fd, idle, busy) for _ in range(3)]
                what = "nothing" if not idle else "%.1f ms %s" % (idle * 1e3, "spinning" if busy else "asleep")
                print("  before each: %-16s %s" % (what, " ".join(rounds)), flush=True)
    finally:
        os.close(fd)
        os.unlink(path)


if __name__ == "__main__":
    main()
