#!/usr/bin/env python3
"""Fails when an #include in src/ points up the layer order.

The layers are the folders of the `foreach(layer ...)` list in the top-level
CMakeLists.txt, lowest first. A file in src/<a>/ may include "<b>/..." only
when <b> is <a> or comes before it in that list.

Inside devices/ the parts are libraries of their own (src/devices/CMakeLists.txt):
the core (files directly in devices/), and the sub-libraries below. A part may
include only the parts DEVICES_DEPS declares for it. Tests (*_test.cc) build
into devices_test, which links every part, so they may also use the mock
hardware and the backend factory.

Every offending line is printed as path:line: text. ALLOW lists the known
exceptions, each with its reason.

Usage: includes_point_down.py [source root]   (default: the current directory)
"""

import os
import re
import sys

# devices/ parts and the parts each may include.
DEVICES_DEPS = {
    "core": {"core"},
    "toolkit": {"core", "toolkit"},
    "nvml": {"core", "nvml"},
    # The mock driver root's etc/ld.so.cache is written with the toolkit's
    # codec (RenderLdCache), so toolkit discovery reads what the mock wrote.
    "mock": {"core", "mock", "toolkit"},
    "backends": {"core", "nvml", "mock", "backends"},
}
DEVICES_TEST_EXTRA = {"mock", "backends"}

# (file, included path): reason.
ALLOW = {}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_order(root):
    with open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"foreach\(\s*layer\s+([^)]*)\)", f.read())
    if not m:
        sys.exit("includes_point_down: no foreach(layer ...) in CMakeLists.txt")
    return m.group(1).split()


def devices_part(rel_in_devices):
    """The devices/ part of a path below devices/ ("nvml/x.h" -> "nvml")."""
    head = rel_in_devices.split("/", 1)
    if len(head) == 2 and head[0] in DEVICES_DEPS and head[0] != "core":
        return head[0]
    return "core"


def check_line(path, included, layers):
    """Why `path` may not include `included`, or None."""
    src_parts = path.split("/")  # src/<layer>/...
    inc_parts = included.split("/")
    if len(inc_parts) < 2 or inc_parts[0] not in layers or src_parts[1] not in layers:
        return None
    src_layer, inc_layer = src_parts[1], inc_parts[0]
    if layers.index(inc_layer) > layers.index(src_layer):
        return f"{src_layer}/ is below {inc_layer}/"
    if src_layer == inc_layer == "devices":
        from_part = devices_part("/".join(src_parts[2:]))
        to_part = devices_part("/".join(inc_parts[1:]))
        allowed = set(DEVICES_DEPS[from_part])
        if path.endswith("_test.cc"):
            allowed |= DEVICES_TEST_EXTRA
        if to_part not in allowed:
            return f"devices part {from_part} may not include {to_part}"
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    layers = layer_order(root)
    bad, used = [], set()
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "src")):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith((".h", ".cc", ".hpp", ".cpp", ".inc")):
                continue
            full = os.path.join(dirpath, name)
            path = os.path.relpath(full, root).replace(os.sep, "/")
            with open(full, encoding="utf-8", errors="replace") as f:
                for n, text in enumerate(f, 1):
                    m = INCLUDE.match(text)
                    if not m:
                        continue
                    why = check_line(path, m.group(1), layers)
                    if why is None:
                        continue
                    if (path, m.group(1)) in ALLOW:
                        used.add((path, m.group(1)))
                        continue
                    bad.append(f"{path}:{n}: {text.strip()}   ({why})")
    for key in sorted(set(ALLOW) - used):
        print(f"note: allow-list entry no longer needed: {key[0]} -> {key[1]}")
    for line in bad:
        print(line)
    if bad:
        print(f"{len(bad)} include(s) point up the layer order {' '.join(layers)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
