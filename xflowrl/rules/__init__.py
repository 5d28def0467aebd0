"""Rewrite rules as data: the project's JSON rule format (`rules_io`:
patterns, validation, load and save; docs/rules.md) and a reader of TASO's
protobuf rule collection (`taso_pb`) and the named rule sets (`sets`).
`xflowrl.engine.xfers` hands rules to the engine; this package imports
only the operator table (`xflowrl.ops`), never the engine.

`files/` holds the shipped rule files, package data found with importlib.resources.
"""
