"""The one exception the package raises for bad input."""

from typing import Optional


class ScenarioError(ValueError):
    """Bad input: a scenario file, a device profile, a trace or an argument.

    Carries what the library names: ``file`` (a path, ``<built-in NAME>``,
    ``<string>`` for TOML text, ``<arguments>`` for a bad argument of the
    call), ``line`` (1-based, when known), ``key`` (the offending key, e.g.
    ``job.bs`` or ``sched``, when known) and ``message``. ``str(error)``
    reads ``file:line: key `key`: message`` as the CLI prints it.
    """

    def __init__(
        self,
        message: str,
        file: str = "<arguments>",
        line: Optional[int] = None,
        key: Optional[str] = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.key = key
        super().__init__(self._text())

    def _text(self) -> str:
        out = self.file
        if self.line is not None:
            out += f":{self.line}"
        if self.key is not None:
            out += f": key `{self.key}`"
        return f"{out}: {self.message}"

    def __reduce__(self):
        # Picklable with its fields, so a Ray task's error arrives whole.
        return (ScenarioError, (self.message, self.file, self.line, self.key))
