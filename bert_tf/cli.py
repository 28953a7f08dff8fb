"""What every bert_tf program shares on the command line (no TensorFlow import).

`run_program` is the one way an absl program starts: its flags come from an options class
(bert_tf.options), flagfiles follow the options' path rule, and a bad flag, a `BertTfError` or an
`OSError` ends as one `PROG: error: MESSAGE` line on stderr with exit status 1 (`run_or_exit`).
PROG is what the user typed: the script or console-script name, or `python -m MODULE`.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, NoReturn, Sequence, TypeVar

from absl import app, flags
from absl import logging as absl_logging

from bert_tf import options as options_lib
from bert_tf.errors import EXPECTED_ERRORS, BertTfError, error_line, run_or_exit, run_or_status

T = TypeVar("T")


class UsageError(BertTfError):
    """Command-line arguments the program does not take."""


def program_name(argv0: str | None = None) -> str:
    """The name the user typed: `python -m pkg.module` for a module run, else the script's base name."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if argv0 is None and spec is not None and spec.name and spec.name != "__main__":
        return f"python -m {spec.name.removesuffix('.__main__')}"
    return os.path.basename(argv0 if argv0 is not None else sys.argv[0])


def run_program(main: Callable[[T], Any], options_cls: type[T], *, doc: str | None = None,
                argv: Sequence[str] | None = None, verbosity: int = absl_logging.INFO,
                errors: tuple[type[BaseException], ...] = EXPECTED_ERRORS) -> NoReturn:
    """Defines `options_cls`'s flags, parses the command line and runs `main(options)` (see the module doc).

    main's return value, when an int, is the exit status. doc: the text `--help` starts with.
    errors: what becomes one error line (a program whose library still raises plain ValueErrors adds it).
    """
    prog = program_name()
    options_lib.define_flags(options_cls, module_name=sys.argv[0])
    if doc:
        setattr(sys.modules["__main__"], "__doc__", doc)
    path_names = options_lib.path_options(options_cls)

    def parse(args: list[str]) -> list[str]:
        try:
            return flags.FLAGS([args[0], *options_lib.expand_flagfiles(args[1:], path_names)])
        except (flags.Error, BertTfError) as e:
            _exit_with_error(prog, e)

    def run(rest: list[str]) -> Any:
        absl_logging.set_verbosity(verbosity)

        def body() -> Any:
            if len(rest) > 1:
                raise UsageError(f"unexpected arguments: {' '.join(rest[1:])}")
            return main(options_lib.from_flags(options_cls))

        status = run_or_exit(body, prog, errors)
        return status if isinstance(status, int) else None

    warn_if_source_tree_lacks_native_tokenizer(prog)
    app.run(run, argv=list(argv) if argv is not None else None, flags_parser=parse)
    raise AssertionError("app.run returned")  # pragma: no cover


def run_argparse(main: Callable[[argparse.Namespace], Any], parser: argparse.ArgumentParser,
                 argv: Sequence[str] | None = None) -> int:
    """Parses `argv` with `parser` and runs `main(args)`; returns the exit status (1 after one error line).

    For the argparse programs (whose arguments follow another tool's conventions); `parser.prog` is PROG.
    """
    args = parser.parse_args(argv)
    warn_if_source_tree_lacks_native_tokenizer(parser.prog)
    status = run_or_status(lambda: main(args), parser.prog)
    return status if isinstance(status, int) else 0


def warn_if_source_tree_lacks_native_tokenizer(prog: str) -> None:
    """One warning line when a clone's bert_tf runs without the native tokenizer an installed build has.

    A script run from a clone (or `python -m` in one) imports the clone's source tree, as a developer
    expects; but a non-editable `pip install .` put the compiled tokenizer only in site-packages, and
    FastTokenizer would fall back to tensorflow-text without a word.
    """
    import importlib.metadata
    import importlib.util

    import bert_tf

    package_dir = os.path.dirname(os.path.abspath(bert_tf.__file__))
    if not os.path.isfile(os.path.join(os.path.dirname(package_dir), "setup.py")):
        return  # an installed build, not a source tree
    if importlib.util.find_spec("bert_tf.text._wordpiece") is not None:
        return
    # Every bert_tf distribution on the path: a clone's own bert_tf.egg-info (from an editable
    # install) may come first and list no compiled files.
    files = [file for dist in importlib.metadata.distributions(name="bert_tf") for file in dist.files or []]
    for file in files:
        if file.name.startswith("_wordpiece.") and file.suffix in (".so", ".pyd"):
            installed = os.path.abspath(str(file.locate()))
            if os.path.isfile(installed) and not installed.startswith(package_dir + os.sep):
                print(f"{prog}: warning: running the source tree {os.path.dirname(package_dir)}, whose native "
                      f"tokenizer is not built (the installed build at {os.path.dirname(installed)} has it): "
                      "run `python setup.py build_ext --inplace` there, or the installed program",
                      file=sys.stderr, flush=True)
                return


def _exit_with_error(prog: str, error: BaseException) -> NoReturn:
    print(error_line(prog, error), file=sys.stderr, flush=True)
    sys.exit(1)


def parse_bool(text: str) -> bool:
    """argparse type for true/false flags written the absl way (`--do_lower_case=false`)."""
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
