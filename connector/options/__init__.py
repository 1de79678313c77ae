"""The options of ``format("hareplica")``, of the landing and of the sink: :mod:`connector.options.declaration`
declares each one once (name, attribute, kind, default, bounds, meaning, holder), :mod:`connector.options.settings`
holds the settings the HA reads and the decoder get, built from it, :mod:`connector.options.parse` parses and
validates the source's option map on the driver, and :mod:`connector.options.functions` resolves the
``module:function`` options for the tasks. This package marker imports none of them, so a task that reads the
declaration does not load the parser.
"""
