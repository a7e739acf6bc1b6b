"""The run's own lines on the terminal, everything in the run's log file.

    python -m verl.trainer.main_ppo ... 2>&1 | python scripts/quiet.py --log outputs/webshop_ppo/run.log

Reads a command's merged output on stdin, appends every line to ``--log`` and prints only:

* lines this project tags, such as ``[step 3] ...``, ``[summary] ...``, ``[precision] ...``, from the
  driver or a Ray worker (whose ``(Name pid=N)`` prefix is dropped);
* lines indented under a shown line (the summary's table, a traceback's frames);
* errors: a Python traceback, an ``...Error: ...`` or ``...Exception: ...`` line, a log line at ERROR or CRITICAL.

Everything else (the engines' and Ray's INFO and WARNING lines, progress bars, library warnings) goes to
the log only. ``--all`` (or ``OPENMANUS_VERBOSE=1`` in the training scripts) prints every line as well.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator, TextIO

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
RAY_PREFIX = re.compile(r"^\(\w+ pid=\d+(?:, ip=[\d.]+)?\)\s?")
TAGGED = re.compile(
    r"^\[[a-z][\w\- ]*(?:/\d+)?\](?:\s|$)"
)  # [step 3], [summary], [env-supervisor]; not torch's [rank0]:
ERROR = re.compile(r"^(Traceback \(most recent call last\)|[\w.]*(Error|Exception)\b|.{0,60}\b(ERROR|CRITICAL)\b)")


def plain(line: str) -> str:
    """``line`` as a terminal leaves it (the text after its last carriage return), without colour codes
    and without a Ray worker's ``(Name pid=N)`` prefix."""
    segments = [seg for seg in ANSI.sub("", line).split("\r") if seg.strip()]
    return RAY_PREFIX.sub("", segments[-1]) if segments else ""


def shown_lines(lines: Iterable[str]) -> Iterator[str]:
    """The lines a user sees, as `plain` text: tagged lines, errors, and lines indented under either."""
    showing = False
    for line in lines:
        text = plain(line.rstrip("\n"))
        if text.strip() and text[0].isspace():
            if showing:
                yield text
            continue
        showing = bool(TAGGED.match(text) or ERROR.match(text))
        if showing:
            yield text


def tee(source: BinaryIO, log: BinaryIO, terminal: TextIO, everything: bool) -> None:
    """Copy ``source`` to ``log`` byte for byte, a line at a time (split at newlines only, so a progress
    bar's carriage returns stay inside its line); echo `shown_lines` (or every line) to ``terminal``."""

    def logged() -> Iterator[str]:
        for raw in source:
            log.write(raw)
            log.flush()
            line = raw.decode("utf-8", errors="replace")
            if everything:
                terminal.write(line)
                terminal.flush()
            yield line

    for text in shown_lines(logged()):
        if not everything:
            terminal.write(text + "\n")
            terminal.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log", required=True, help="file every line is appended to (its folder is created)")
    parser.add_argument("--all", action="store_true", help="print every line too")
    args = parser.parse_args()
    Path(args.log).parent.mkdir(parents=True, exist_ok=True)
    with open(args.log, "ab") as log:
        tee(sys.stdin.buffer, log, sys.stdout, args.all)


if __name__ == "__main__":
    main()
