"""Logging through the host: tagged with the plugin and the parent in the host's log."""

from __future__ import annotations

import sys


def _emit(level: str, message: str) -> None:
    try:
        # Only a component has the host's import; natively (tests) lines go to stderr.
        from wit_world.imports import host_log, types
    except ImportError:
        print(f"{level.upper()} {message}", file=sys.stderr)
        return
    host_log.log(getattr(types.LogLevel, level.upper()), message)


def trace(message: str) -> None:
    _emit("trace", message)


def debug(message: str) -> None:
    _emit("debug", message)


def info(message: str) -> None:
    _emit("info", message)


def warn(message: str) -> None:
    _emit("warn", message)


def error(message: str) -> None:
    _emit("error", message)
