"""``python -m broker_stub.namesrv``: run the name server stub (see :mod:`broker_stub.namesrv`)."""

from __future__ import annotations

import sys

from broker_stub.namesrv import main

if __name__ == "__main__":
    sys.exit(main())
