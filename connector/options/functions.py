"""``package.module:function`` specs resolved to functions: ``OPTIONS.batch_transform`` of
``format("hareplica")`` and the ``landingSplit`` option of ``format("hareplica-landing")``. The tasks import this
module to find the function they apply, and the parser (:mod:`connector.options.parse`) to fail on the driver
first; it stands apart from the parser so that a task does not import the parser.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from connector.errors import HAReplicaOptionError


def import_function(option: str, spec: str) -> Callable:
    """The function ``spec`` (``package.module:function``) names, for option ``option``.

    Raises HAReplicaOptionError naming the option when ``spec`` is malformed, its module does not import or the
    attribute is missing or not callable.
    """
    module_name, _, attr = spec.partition(":")
    try:
        if not module_name or not attr:
            raise ValueError("expected package.module:function")
        function = getattr(importlib.import_module(module_name), attr)
        if not callable(function):
            raise ValueError(f"{attr} is not a function")
    except (ImportError, AttributeError, ValueError) as e:
        raise HAReplicaOptionError(option, spec, str(e)) from None
    return function
