"""The argument parser of ncclbind's command-line tools (bench, trace): a bad command line is
one line on stderr and exit status 2, as every other bad input of the tools is, instead of
argparse's usage block followed by the error."""
from __future__ import annotations

import argparse


class CommandLineError(ValueError):
    """A flag or argument that is wrong: the message names it."""


class OneLineParser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose errors raise CommandLineError (and whose subparsers do too);
    --help still prints the help and exits 0."""

    def error(self, message: str):
        raise CommandLineError(message)
