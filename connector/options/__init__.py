"""The options of ``format("hareplica")``: :mod:`connector.options.declaration` declares each one once (name,
settings attribute, type, default, bounds, meaning), :mod:`connector.options.settings` holds the settings the
HA reads and the decoder get, :mod:`connector.options.parse` parses and validates Spark's option map on the
driver, and :mod:`connector.options.functions` resolves the ``module:function`` options for the tasks. This
package marker imports none of them, so a task that reads the declaration does not load the parser.
"""
