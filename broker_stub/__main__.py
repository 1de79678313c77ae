"""``python -m broker_stub -c broker.conf``: run the RocketMQ 4.9.8 broker stub (see :mod:`broker_stub.cli`)."""

from __future__ import annotations

import sys

from broker_stub.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
