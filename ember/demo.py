"""`make demo`: generate small TPC-H data, capture a few queries, print traces."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

TPCH_TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")


def ensure_tpch(path: Path, scale: float) -> None:
    """Writes TPC-H Parquet (one file per table) with tpchgen-cli unless it is already there."""
    if all((path / f"{t}.parquet").exists() for t in TPCH_TABLES):
        return
    exe = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [exe, "parquet", "-s", str(scale), "--output-dir", str(path)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ember-demo", description=__doc__)
    parser.add_argument("--scale", type=float, default=0.01)
    parser.add_argument("--data", type=Path, default=Path("data/tpch/sf0.01"))
    parser.add_argument("--generate-only", action="store_true")
    args = parser.parse_args(argv)
    ensure_tpch(args.data, args.scale)
    if args.generate_only:
        return 0
    print("demo: not written yet")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
