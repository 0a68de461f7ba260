#!/usr/bin/env python3
"""A stand-in for a peer's benchmark (flexgen_run.py, hf_decode.py) in
`scripts/gpu-window --rehearse`, where no GPU, torch or FlexGen is at hand:
it takes the options the real program is given by a sweep, prints one JSON
object that says it is a rehearsal (never a measurement) and echoes them.
--standin-sleep S waits S seconds first (the rehearsal's time limits);
--standin-fail makes it exit 1 with a one-line error. Not for measurement.
"""
import json
import sys
import time


def main(argv):
    opts, i = {}, 0
    while i < len(argv):
        a = argv[i]
        if not a.startswith("--"):
            print(f"peer_standin.py: unexpected argument {a!r}", file=sys.stderr)
            return 2
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            opts[a[2:]] = argv[i + 1]
            i += 2
        else:
            opts[a[2:]] = True
            i += 1
    if "json" not in opts:
        print("peer_standin.py: --json expected (alisa sweep passes it)", file=sys.stderr)
        return 2
    time.sleep(float(opts.pop("standin-sleep", 0)))
    if opts.pop("standin-fail", False):
        print("peer_standin.py: failing as asked (--standin-fail)", file=sys.stderr)
        return 1
    opts.pop("json")
    print(json.dumps({"system": "rehearsal-standin", "rehearsal": True,
                      "model": opts.get("model", ""), "options": opts}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
