#!/usr/bin/env python3
"""Run Stateous from a checkout: `python stateous.py serve ...`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stateous.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
