"""OpenSpec, pure: the OpenSpec CLI 1.13.2's readers, validator and archive merge, ported to Python.

No I/O and no trio: every function reads a workspace through a `source.Source` and returns the
CLI's JSON shapes (`model`) or a plan of writes (`archive`, `edits`); the toolset does the I/O.
Modules: `text` (JS string semantics), `markdown`/`blocks` (parsers), `spec_rules`/`change_rules`
(validation), `merge`/`retire`/`archive` (archive), `workspace` (list, show, validate),
`cache` (the cached Source), `resources`, `edits`, `project`, `tasks`, `templates`, `render`.
"""
