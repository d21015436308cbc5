"""A fresh process that measures one Item: ``python -m cake_rt.bench.worker SPEC.json OUT.json``.

SPEC.json: {"item": Item.to_dict(), "opts": {...}, "order": 0 | 1}; OUT.json gets the raw records.
"""
from __future__ import annotations

import json
import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 2:
        print("usage: python -m cake_rt.bench.worker SPEC.json OUT.json", file=sys.stderr)
        return 2
    from .cases import run_item
    from .suites import Item

    with open(argv[0]) as f:
        spec = json.load(f)
    recs = run_item(Item.from_dict(spec["item"]), spec.get("opts", {}), int(spec.get("order", 0)))
    with open(argv[1], "w") as f:
        json.dump(recs, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
