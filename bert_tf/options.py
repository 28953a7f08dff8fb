"""A program's options, declared once: name, type, default and help in a frozen dataclass; absl flags from it.

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class PretrainingOptions(TrainingOptions):
        input_file: str | None = option(None, "Input TFRecord file(s): comma-separated globs.",
                                        required=True, path=True)
        max_seq_length: int = option(128, "Maximum sequence length.", positive=True)

    define_flags(PretrainingOptions)            # one absl flag per field, at import of the program
    options = from_flags(PretrainingOptions)    # in main, after absl parsed the command line
    options = parse(PretrainingOptions, ["--input_file=x", ...])   # tests and library users

The flag's type comes from the annotation (str, int, float, bool, `X | None`; `enum=(...)` for a choice
of strings). A program's options class inherits shared groups (`TrainingOptions`) and may re-declare a
field to change its default. `Options.validate` checks what the declaration says (required, positive,
non-negative, minimum, maximum, enum) with one line naming the flag; programs add their cross-field checks
by overriding it.

Compatibility flags of the original release that mean one of ours are fields too, declared with
`alias_of=NAME` (and `alias_value=` when the flag's own value is not the one to use, e.g. `--use_tpu`
means `--strategy=tpu`): when given, they set the option they alias and are then reset to their default,
so an options object holds each setting in one place. Flags the original had and that do nothing here are
declared with `alias_of=None` and help that says so.

Flagfiles: in a `--flagfile`, a relative value of an option declared with `path=True` (each part of a
comma-separated list) is relative to the flagfile's own folder, so `configs/*.flags` work from any
directory. On the command line, relative paths are relative to the current directory as usual.
"""
from __future__ import annotations

import dataclasses
import os
import types
import typing
from typing import Any, Iterable, Sequence, TypeVar

from absl import flags

from bert_tf.errors import BertTfError

T = TypeVar("T")
_META = "bert_tf_option"
_FLAGFILE_DIRECTIVES = ("--flagfile=", "-flagfile=")


class OptionError(BertTfError, ValueError):
    """An option value that cannot work; the message names the flag."""


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    """What `option()` records about a field, beyond its dataclass default."""

    help: str
    enum: tuple[str, ...] | None = None
    required: bool = False
    positive: bool = False
    non_negative: bool = False
    minimum: float | None = None
    maximum: float | None = None
    flag: bool = True
    path: bool = False
    alias_of: str | None = None
    alias_value: Any = None


def option(default: Any, help: str, *, enum: Sequence[str] | None = None, required: bool = False,
           positive: bool = False, non_negative: bool = False, minimum: float | None = None,
           maximum: float | None = None, flag: bool = True, path: bool = False,
           alias_of: str | None = None, alias_value: Any = None) -> Any:
    """A dataclass field that is also a command-line flag (see the module docstring).

    required: validate() refuses None (the default is None). positive / non_negative: validate() refuses
    values <= 0 / < 0. minimum / maximum: validate() refuses values below / above them (with positive or
    non_negative they make an interval: positive=True, maximum=1 is (0, 1]). enum: the allowed strings.
    flag=False: an option of the library API only.
    path: a relative value in a flagfile is relative to the flagfile's folder. alias_of: a compatibility
    flag that, when given, sets that option (to alias_value when given, else to its own value).
    """
    spec = OptionSpec(help, tuple(enum) if enum is not None else None, required, positive, non_negative,
                      minimum, maximum, flag, path, alias_of, alias_value)
    return dataclasses.field(default=default, metadata={_META: spec})


@dataclasses.dataclass(frozen=True)
class _Declared:
    name: str
    type: type
    default: Any
    spec: OptionSpec


def declared_options(cls: type) -> list[_Declared]:
    """Every field of an options class declared with `option()`, in declaration order."""
    hints = typing.get_type_hints(cls)
    result = []
    for field in dataclasses.fields(cls):
        spec = field.metadata.get(_META)
        if spec is not None:
            result.append(_Declared(field.name, _flag_type(hints[field.name], field.name), field.default, spec))
    return result


def _flag_type(annotation: Any, name: str) -> type:
    """str / int / float / bool from `X` or `X | None`."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            annotation = args[0]
    if annotation not in (str, int, float, bool):
        raise TypeError(f"option {name}: type {annotation!r} is not str, int, float or bool (or X | None)")
    return annotation


class Options:
    """Base of the options classes: alias resolution on construction, validate() from the declaration."""

    def __post_init__(self) -> None:
        _resolve_aliases(self)

    def validate(self) -> None:
        """OptionError naming the first flag whose value the declaration does not allow."""
        for declared in declared_options(type(self)):
            _check(declared, getattr(self, declared.name))


def _resolve_aliases(options: Any) -> None:
    """Moves each given compatibility flag's value onto the option it aliases; the first given wins."""
    settled: set[str] = set()
    for declared in declared_options(type(options)):
        target = declared.spec.alias_of
        if target is None:
            continue
        value = getattr(options, declared.name)
        if value == declared.default:
            continue
        if target not in settled:
            alias_value = declared.spec.alias_value
            object.__setattr__(options, target, value if alias_value is None else alias_value)
            settled.add(target)
        object.__setattr__(options, declared.name, declared.default)


def _check(declared: _Declared, value: Any) -> None:
    spec, flag = declared.spec, f"--{declared.name}"
    if value is None:
        if spec.required:
            raise OptionError(f"{flag} is required")
        return
    if spec.enum is not None and value not in spec.enum:
        raise OptionError(f"{flag}={value!r} is not one of {', '.join(spec.enum)}")
    if not _within(spec, value):
        raise OptionError(f"{flag} must be {_allowed(spec)}, got {value}")


def _within(spec: OptionSpec, value: float) -> bool:
    return not ((spec.positive and value <= 0) or (spec.non_negative and value < 0)
                or (spec.minimum is not None and value < spec.minimum)
                or (spec.maximum is not None and value > spec.maximum))


def _allowed(spec: OptionSpec) -> str:
    """What the declaration allows, in words: "positive", ">= 0", "at most 8192", "within (0, 1]"."""
    low = f"[{spec.minimum:g}" if spec.minimum is not None else "(0" if spec.positive else \
        "[0" if spec.non_negative else None
    if spec.maximum is not None:
        return f"within {low}, {spec.maximum:g}]" if low else f"at most {spec.maximum:g}"
    if spec.minimum is not None:
        return f"at least {spec.minimum:g}"
    return "positive" if spec.positive else ">= 0"


_DEFINE = {str: flags.DEFINE_string, int: flags.DEFINE_integer, float: flags.DEFINE_float,
           bool: flags.DEFINE_bool}
_FLAG_TYPES = {str: "string", int: "int", float: "float", bool: "bool"}


def define_flags(cls: type, flag_values: flags.FlagValues = flags.FLAGS, *,
                 module_name: str | None = None) -> None:
    """Defines one absl flag per option of `cls` (skipping flags already defined with the same type).

    module_name: the module `--help` lists the flags under (a program passes sys.argv[0], its main).
    """
    for declared in declared_options(cls):
        if not declared.spec.flag:
            continue
        help_text = declared.spec.help
        if declared.name in flag_values:
            _check_same_type(flag_values[declared.name], declared)
            continue
        if declared.spec.enum is not None:
            flags.DEFINE_enum(declared.name, declared.default, list(declared.spec.enum), help_text,
                              flag_values=flag_values, module_name=module_name)
        else:
            _DEFINE[declared.type](declared.name, declared.default, help_text, flag_values=flag_values,
                                   module_name=module_name)


def _check_same_type(existing: flags.Flag, declared: _Declared) -> None:
    expected = "enum" if declared.spec.enum is not None else _FLAG_TYPES[declared.type]
    kind = existing.flag_type()
    if kind == "string enum":
        kind = "enum"
    if kind != expected:
        raise TypeError(f"flag --{declared.name} is already defined as {kind}, not {expected}")


def from_flags(cls: type[T], flag_values: flags.FlagValues = flags.FLAGS) -> T:
    """An instance of `cls` from parsed flags; an option whose flag kept its default takes the class's."""
    values = {}
    for declared in declared_options(cls):
        if declared.spec.flag and declared.name in flag_values:
            flag = flag_values[declared.name]
            if not flag.using_default_value:
                values[declared.name] = flag.value
    return cls(**values)


def parse(cls: type[T], argv: Sequence[str], *, program: str = "program") -> T:
    """Parses `argv` (flags only, no program name) on fresh FlagValues into an instance of `cls`.

    Flagfiles follow the same rule as on the command line; unknown flags raise OptionError.
    """
    options, rest = _parse(cls, argv, program, known_only=False)
    if rest:
        raise OptionError(f"unexpected arguments: {' '.join(rest)}")
    return options


def parse_known(cls: type[T], argv: Sequence[str], *, program: str = "program") -> tuple[T, list[str]]:
    """`parse` for a program that hands what is not its own to another parser (Beam's pipeline options).

    Its own flags are parsed strictly (a bad value is an OptionError); every other argument comes back,
    in order, for the other parser, which must then refuse what it does not know either.
    """
    return _parse(cls, argv, program, known_only=True)


def _parse(cls: type[T], argv: Sequence[str], program: str, known_only: bool) -> tuple[T, list[str]]:
    flag_values = flags.FlagValues()
    define_flags(cls, flag_values)
    try:
        rest = flag_values([program, *expand_flagfiles(argv, path_options(cls))], known_only=known_only)
    except flags.Error as e:
        raise OptionError(str(e)) from None
    return from_flags(cls, flag_values), rest[1:]


def path_options(cls: type) -> set[str]:
    """Names of the options declared with path=True."""
    return {d.name for d in declared_options(cls) if d.spec.path}


def expand_flagfiles(argv: Sequence[str], path_names: Iterable[str]) -> list[str]:
    """argv with each --flagfile replaced by its flags (absl's file format, nested files included),
    relative values of `path_names` made relative to the flagfile's folder (the module docstring's rule)."""
    path_names = set(path_names)
    result: list[str] = []
    args = list(argv)
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            result.extend(args[index - 1:])
            break
        if arg in ("--flagfile", "-flagfile") and index < len(args):
            result.extend(_read_flagfile(os.path.expanduser(args[index]), path_names, []))
            index += 1
        elif arg.startswith(_FLAGFILE_DIRECTIVES):
            result.extend(_read_flagfile(os.path.expanduser(arg.split("=", 1)[1].strip()), path_names, []))
        else:
            result.append(arg)
    return result


def _read_flagfile(filename: str, path_names: set[str], stack: list[str]) -> list[str]:
    if not filename or os.path.abspath(filename) in stack:
        return []
    try:
        with open(filename, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as e:
        raise OptionError(f"--flagfile: cannot read {filename}: {e.strerror or e}") from None
    folder = os.path.dirname(os.path.abspath(filename))
    stack = [*stack, os.path.abspath(filename)]
    result = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith(("#", "//")):
            continue
        if line.startswith(_FLAGFILE_DIRECTIVES):
            nested = os.path.expanduser(line.split("=", 1)[1].strip())
            result.extend(_read_flagfile(_relative_to(folder, nested), path_names, stack))
            continue
        name, equals, value = line.lstrip("-").partition("=")
        if equals and name in path_names:
            value = ",".join(_relative_to(folder, part) for part in value.split(","))
            line = f"--{name}={value}"
        result.append(line)
    return result


def _relative_to(folder: str, value: str) -> str:
    """`value` joined to `folder` when it is a relative local path; URLs (gs://...) and absolute paths as they are."""
    value = os.path.expanduser(value)
    if not value or os.path.isabs(value) or "://" in value:
        return value
    return os.path.normpath(os.path.join(folder, value))
