"""The file to give ``spark-submit``: it runs the ``hareplica`` command line (docs/deployment.md).

``spark-submit [--master ... --archives ...] PATH/streaming_apps/submit.py run bronze --brokers ...`` takes
the same arguments as ``hareplica``; spark-submit's ``--master`` and ``--conf`` rule over the app's.
``python -c "import streaming_apps.submit as m; print(m.__file__)"`` prints PATH/streaming_apps/submit.py
of an installed hareplica.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    """Run :func:`streaming_apps.cli.main` on ``argv`` (default the script's arguments); its exit code."""
    from streaming_apps.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    # spark-submit runs this file as a script, which puts its own folder first on sys.path; the modules
    # beside it are streaming_apps.*, never top-level ones
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    sys.exit(main())
