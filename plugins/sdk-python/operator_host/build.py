"""`python -m operator_host.build MODULE:OPERATOR -o PLUGIN.wasm`: a plugin component from a Python module, with componentize-py."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: The contract's WIT, vendored with the SDK (the same file as the host's `wit/`).
WIT = Path(__file__).parent / "wit"
WORLD = "operator-host:reconciler/reconciler@0.3.0"
SDK_PATH = Path(__file__).parent.parent

# componentize-py imports the app by module name: this one exports the operator.
APP_MODULE = "_operator_host_app"
APP_SOURCE = """from {module} import {attribute} as _operator

Plugin = _operator.export()
"""


def componentize(target: str, output: Path, python_path: list[Path]) -> None:
    """Builds the component `output` from `target` (`module:attribute`, an `Operator`),
    with `python_path` searched for the module and what it imports."""
    module, _, attribute = target.partition(":")
    if not module or not attribute:
        raise SystemExit(f"error: {target!r} is not MODULE:OPERATOR (e.g. memcached:operator)")
    with tempfile.TemporaryDirectory(prefix="operator-host-build-") as app_dir:
        Path(app_dir, f"{APP_MODULE}.py").write_text(
            APP_SOURCE.format(module=module, attribute=attribute)
        )
        paths = [Path(app_dir), *python_path, SDK_PATH]
        command = [
            sys.executable,
            "-c",
            "import sys; from componentize_py import script; sys.argv[0] = 'componentize-py'; sys.exit(script())",
            "--wit-path",
            str(WIT),
            "--world",
            WORLD,
            "componentize",
            APP_MODULE,
            "--output",
            str(output),
        ]
        for path in paths:
            command += ["--python-path", str(path)]
        # Only the paths given are bundled: not the build environment's site-packages.
        env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
        subprocess.run(command, check=True, env=env)


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m operator_host.build",
        description="Build an operator-host plugin component from a Python module.",
    )
    parser.add_argument("target", help="MODULE:OPERATOR, e.g. memcached:operator")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the .wasm to write")
    parser.add_argument(
        "-p",
        "--python-path",
        type=Path,
        action="append",
        default=[],
        help="a directory holding the module (default: the current directory)",
    )
    args = parser.parse_args()
    output = args.output.resolve()
    tmp = output.with_name(output.name + ".tmp")
    componentize(args.target, tmp, [p.resolve() for p in args.python_path] or [Path.cwd()])
    # Written whole, then renamed: a host watching the directory never loads half a file.
    tmp.replace(output)


if __name__ == "__main__":
    main()
