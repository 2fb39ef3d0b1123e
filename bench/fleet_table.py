#!/usr/bin/env python3
"""Prints the fleet benchmark's figures of several runs side by side, as the
Markdown table of docs/benchmarks.md ("A fleet"): one column per
`bench/fleet_bench.py --json-out` file, in the order given.

Usage: python3 bench/fleet_table.py run1.json run2.json run3.json
"""

import json
import sys


def mib(kib):
    return "%.0f" % (kib / 1024.0)


ROWS = [
    ("load average at start (1, 5, 15 min)", lambda d: " ".join("%.1f" % x for x in d["load_average_start"])),
    ("start: 200 plugins registered and published", lambda d: "%.0f s" % d["start_seconds"]),
    ("API requests per node per hour, idle (600-s window)", lambda d: "%.1f" % d["idle"]["requests_per_node_hour"]),
    ("&nbsp;&nbsp;GPU plugin", lambda d: "%.1f" % d["idle"]["requests_per_node_hour_by_plugin"]["gpu"]),
    ("&nbsp;&nbsp;ComputeDomain plugin", lambda d: "%.1f" % d["idle"]["requests_per_node_hour_by_plugin"]["cd"]),
    ("&nbsp;&nbsp;of them watch requests (reconnections)", lambda d: "%.1f" % d["idle"]["watch_requests_per_node_hour"]),
    ("watches held per node", lambda d: "%g" % d["idle"]["watches_per_node"]["median"]),
    ("RSS of all 200 plugins, idle (MiB)", lambda d: mib(d["footprint_idle"]["all"]["rss_kib_total"])),
    ("PSS of all 200 plugins, idle (MiB)", lambda d: mib(d["footprint_idle"]["all"]["pss_kib_total"])),
    ("threads of all plugins, idle (median GPU / ComputeDomain)",
     lambda d: "%d (%g / %g)" % (d["footprint_idle"]["all"]["threads_total"],
                                 d["footprint_idle"]["gpu"]["threads_median"],
                                 d["footprint_idle"]["cd"]["threads_median"])),
    ("API server RSS, idle (MiB)", lambda d: mib(d["apiserver_idle"]["VmRSS"])),
    ("prepare half: wall time (s)", lambda d: "%.1f" % d["wave"]["prepare"]["seconds"]),
    ("prepare half: API requests", lambda d: "%d" % d["wave"]["prepare"]["requests"]),
    ("prepare half: API requests per second (mean)", lambda d: "%.0f" % d["wave"]["prepare"]["requests_per_s"]),
    ("prepare half: API requests in the busiest second", lambda d: "%d" % d["wave"]["prepare"]["requests_per_s_peak"]),
    ("prepare p50 (ms)", lambda d: "%.0f" % d["wave"]["prepare"]["latency_ms"]["p50"]),
    ("prepare p99 (ms)", lambda d: "%.0f" % d["wave"]["prepare"]["latency_ms"]["p99"]),
    ("&nbsp;&nbsp;GPU claims p50 / p99 (ms)",
     lambda d: "%.0f / %.0f" % (d["wave"]["prepare"]["latency_ms_gpu"]["p50"],
                                d["wave"]["prepare"]["latency_ms_gpu"]["p99"])),
    ("&nbsp;&nbsp;channel claims p50 / p99 (ms)",
     lambda d: "%.0f / %.0f" % (d["wave"]["prepare"]["latency_ms_cd"]["p50"],
                                d["wave"]["prepare"]["latency_ms_cd"]["p99"])),
    ("unprepare p50 / p99 (ms)",
     lambda d: "%.0f / %.0f" % (d["wave"]["unprepare"]["latency_ms"]["p50"],
                                d["wave"]["unprepare"]["latency_ms"]["p99"])),
    ("unprepare half: API requests", lambda d: "%d" % d["wave"]["unprepare"]["requests"]),
    ("RSS of all plugins after the wave (MiB)", lambda d: mib(d["footprint_after"]["all"]["rss_kib_total"])),
    ("API server RSS after the wave (MiB)", lambda d: mib(d["apiserver_after"]["VmRSS"])),
]


def main(paths):
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs = []
    for p in paths:
        with open(p) as f:
            runs.append(json.load(f))
    print("| figure | " + " | ".join("run %d" % (i + 1) for i in range(len(runs))) + " |")
    print("|---|" + "---:|" * len(runs))
    for name, get in ROWS:
        cells = []
        for d in runs:
            try:
                cells.append(get(d))
            except (KeyError, TypeError, ValueError):
                cells.append("n/a")
        print("| %s | %s |" % (name, " | ".join(cells)))
    print()
    for i, d in enumerate(runs):
        verbs = d["wave"]["prepare"].get("requests_by_verb", {})
        print("run %d prepare by verb: %s" % (i + 1, json.dumps(verbs, sort_keys=True)))
        print("run %d unprepare by verb: %s" % (i + 1, json.dumps(d["wave"]["unprepare"].get("requests_by_verb", {}),
                                                                sort_keys=True)))
        print("run %d idle by verb: %s" % (i + 1, json.dumps(d["idle"]["requests_per_node_hour_by_verb"], sort_keys=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
