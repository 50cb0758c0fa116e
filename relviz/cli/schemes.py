"""python -m relviz schemes [--json]: every position scheme the registry found, with its parameters."""
from __future__ import annotations

import argparse
import json

from relviz.schemes import REGISTRY


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="print the list as JSON (name, summary, parameters with defaults and ranges, "
                             "causal-only, the module it lives in)")


def run(args: argparse.Namespace) -> int:
    infos = [scheme.info() for scheme in REGISTRY.values()]
    if args.json:
        print(json.dumps(infos, indent=2))
        return 0
    for info in infos:
        causal = " [causal only]" if info["causal_only"] else ""
        print(f"{info['name']}{causal}: {info['summary']}")
        for param in info["parameters"]:
            app = f"; app {param['app_range'][0]}..{param['app_range'][1]}" if param["app_range"] else ""
            low = ">" if param["exclusive_minimum"] else ">="
            bounds = " and ".join(part for part in (
                f"{low} {param['minimum']}" if param["minimum"] is not None else "",
                f"<= {param['maximum']}" if param["maximum"] is not None else "") if part)
            print(f"    {param['flag']} {param['type']} (default {param['default']}; {bounds}{app}): {param['help']}")
    return 0
