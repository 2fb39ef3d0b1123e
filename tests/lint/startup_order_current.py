#!/usr/bin/env python3
"""cmake/startup-order.txt still names the plugins' start-up functions, and
the linker laid them out together (cmake/NvdraHelpers.cmake): a list gone
stale, or an order the link ignored, loses the idle memory it saves without
any other test noticing.

Usage: startup_order_current.py ORDER_FILE [--laid-out] BINARY...
"""
import subprocess
import sys


def functions(binary):
    out = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    by_name = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            by_name[parts[2]] = int(parts[0], 16)
    return by_name


def main():
    args = sys.argv[1:]
    order_file = args.pop(0)
    laid_out = "--laid-out" in args
    binaries = [a for a in args if a != "--laid-out"]
    listed = [l.strip() for l in open(order_file) if l.strip()]
    assert len(listed) > 1000, "%s lists only %d functions" % (order_file, len(listed))
    failures = []
    known = set()
    for binary in binaries:
        fns = functions(binary)
        known |= set(fns) & set(listed)
        if laid_out:
            # The listed functions sit in one stretch at the start of the
            # text, not spread over all of it.
            addrs = sorted(fns[n] for n in listed if n in fns)
            text = sorted(fns.values())
            span = addrs[-1] - addrs[0]
            whole = text[-1] - text[0]
            if span > whole // 4:
                failures.append("%s: the listed functions span %d of %d bytes of text: not laid out together"
                                % (binary, span, whole))
    share = len(known) / len(listed)
    if share < 0.8:
        failures.append("only %.0f%% of the %d functions in %s are in the plugins: rerun scripts/startup-order"
                        % (100 * share, len(listed), order_file))
    for f in failures:
        print(f)
    print("%d of %d listed functions found" % (len(known), len(listed)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
