"""`python -m ember.ui DIR [--host H] [--port P] [--token T | --no-token]`: the page without the `ember` command
(which serves folders written by `ember run`); any folder of stores or a views.toml."""

from __future__ import annotations

import argparse
import sys

from ember.errors import EmberError
from ember.ui import serve


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ember.ui", description="Serves the linked-brushing page over lineage stores and/or a views.toml."
    )
    parser.add_argument("folder", help="store folders and/or a views.toml (docs/ui.md)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    auth = parser.add_mutually_exclusive_group()
    auth.add_argument("--token", help="the token the page's API asks for (default: a random one, printed)")
    auth.add_argument("--no-token", action="store_true", help="no token: for trusted setups only (docs/guide/security.md)")
    args = parser.parse_args()
    try:
        serve(args.folder, args.host, args.port, token=args.token, no_token=args.no_token)
    except EmberError as e:
        print(f"ember ui: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
