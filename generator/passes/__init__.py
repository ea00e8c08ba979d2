"""Passes over the IR: extract (clang -> IR), macros, directions, merge."""
