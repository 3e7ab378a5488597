"""The ``#SBATCH`` directives of a batch script, read as sbatch reads them. Pure: no I/O.

sbatch takes options from the lines that start with ``#SBATCH`` in the script's leading block:
it stops at the first line whose first non-blank character is not ``#`` (a command), and skips
blank lines and other comments (an indented ``#SBATCH`` included). A directive's arguments are
split at blanks; ``"`` and ``'`` quote, a backslash escapes the next character, and an unquoted
``#`` starts a comment. Written from Slurm 22.05's ``src/sbatch/opt.c``.

What hpcbridge refuses in them is ``rules.SlurmRules.check_script``'s to say. ``#PBS`` and
``#BSUB`` lines, which sbatch would also read (``#BSUB -cwd /tmp`` moved a job on the test
cluster), are ignored: sbatch runs with ``--ignore-pbs`` (``commands.sbatch_argv``).
"""

from __future__ import annotations

from collections.abc import Iterator

MAGIC = "#SBATCH"
BLANKS = " \t\n\v\f\r"
"""C's isspace() in the C locale, which sbatch splits at."""


def directives(script: str) -> Iterator[tuple[int, str, list[str]]]:
    """The (line number, line, arguments) of each directive sbatch reads."""
    for number, line in enumerate(script.split("\n"), start=1):
        if line.startswith(MAGIC):
            yield number, line, arguments(line[len(MAGIC):])
        elif line.lstrip(BLANKS)[:1] not in ("", "#"):
            return


def arguments(text: str) -> list[str]:
    """A directive's arguments, split, unquoted and unescaped as sbatch does.

    >>> arguments(' --comment="a b" -J\\\\ x  # a comment')
    ['--comment=a b', '-J x']
    """
    args: list[str] = []
    word: list[str] = []
    started, quote, escaped = False, "", False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = started = True
            continue
        elif quote:
            if char == quote:
                quote = ""
                continue
        elif char in "\"'":
            quote, started = char, True
            continue
        elif char in BLANKS:
            if started:
                args.append("".join(word))
            word, started = [], False
            continue
        elif char == "#":
            break
        word.append(char)
        started = True
    return [*args, "".join(word)] if started else args
