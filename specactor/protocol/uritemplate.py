"""RFC 6570 URI templates, the subset resources need: `{var}` (one path segment) and
`{+var}` (reserved expansion: may span `/`). Matching is anchored and exact."""

from __future__ import annotations

import re
from functools import cached_property
from urllib.parse import unquote

import msgspec

_VAR = re.compile(r"\{(\+?)([A-Za-z0-9_\-]+)\}")


class UriTemplate(msgspec.Struct, frozen=True, dict=True):
    template: str

    @cached_property
    def variables(self) -> tuple[str, ...]:
        return tuple(m.group(2) for m in _VAR.finditer(self.template))

    @cached_property
    def _regex(self) -> re.Pattern[str]:
        out, pos = [], 0
        for m in _VAR.finditer(self.template):
            out.append(re.escape(self.template[pos:m.start()]))
            out.append(f"(?P<{m.group(2).replace('-', '_')}>{'.+' if m.group(1) else '[^/?#]+'})")
            pos = m.end()
        out.append(re.escape(self.template[pos:]))
        return re.compile("".join(out) + r"\Z")

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of `uri` under this template, percent-decoded, or None."""
        m = self._regex.match(uri)
        if m is None:
            return None
        out = {}
        for name, reserved in self._kinds:
            value = unquote(m.group(name.replace("-", "_")))
            # Decoding must not smuggle in what the raw match excluded: a separator in a
            # one-segment variable, a `..` segment or a NUL anywhere.
            if "\x00" in value or ".." in value.split("/") or (not reserved and "/" in value):
                return None
            out[name] = value
        return out

    @cached_property
    def _kinds(self) -> tuple[tuple[str, bool], ...]:
        return tuple((m.group(2), bool(m.group(1))) for m in _VAR.finditer(self.template))

    def expand(self, **values: str) -> str:
        return _VAR.sub(lambda m: values[m.group(2)], self.template)
