"""bert_tf.options: options declared once, absl flags made from the declaration, flagfiles from any folder."""
import dataclasses
import os

import pytest
from absl import flags

from bert_tf.options import OptionError, Options, define_flags, expand_flagfiles, from_flags, option, parse
from bert_tf.training.options import TrainingOptions


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToyOptions(TrainingOptions):
    input_file: str | None = option(None, "Inputs.", required=True, path=True)
    max_seq_length: int = option(128, "Length.", positive=True)
    dropout: float = option(0.1, "Dropout.", non_negative=True)
    mode: str = option("fast", "Mode.", enum=("fast", "exact"))
    library_only: int = option(3, "Not a flag.", flag=False)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LongerToyOptions(ToyOptions):
    max_seq_length: int = option(384, "Length (SQuAD).", positive=True)


REQUIRED = ["--input_file=in", "--output_dir=out", "--bert_config_file=config.json"]


def test_flags_take_type_default_and_help_from_the_declaration():
    values = flags.FlagValues()
    define_flags(ToyOptions, values)
    assert values["max_seq_length"].flag_type() == "int" and values["max_seq_length"].default == 128
    assert values["dropout"].flag_type() == "float" and values["dropout"].help == "Dropout."
    assert values["mode"].flag_type() == "string enum" and values["mode"].parser.enum_values == ["fast", "exact"]
    assert values["jit_compile"].flag_type() == "bool" and values["jit_compile"].default is False
    assert values["seed"].flag_type() == "int" and values["seed"].default is None
    assert "library_only" not in values


def test_parsed_options_keep_the_original_release_defaults():
    options = parse(ToyOptions, REQUIRED)
    assert (options.train_batch_size, options.eval_batch_size, options.learning_rate) == (32, 8, 5e-5)
    assert (options.save_checkpoints_steps, options.keep_checkpoint_max, options.steps_per_loop) == (1000, 5, 100)
    assert (options.strategy, options.optimizer, options.mixed_precision) == ("default", "adamw", "float32")
    assert options.input_file == "in" and options.library_only == 3
    assert options == ToyOptions(input_file="in", output_dir="out", bert_config_file="config.json")


def test_a_subclass_redeclares_a_default_and_its_flags_follow():
    assert parse(LongerToyOptions, REQUIRED).max_seq_length == 384
    assert parse(LongerToyOptions, [*REQUIRED, "--max_seq_length=512"]).max_seq_length == 512


def test_defining_the_same_flags_twice_does_not_clash_and_each_class_keeps_its_defaults():
    values = flags.FlagValues()
    define_flags(ToyOptions, values)
    define_flags(LongerToyOptions, values)
    values(["prog", *REQUIRED])
    assert from_flags(ToyOptions, values).max_seq_length == 128
    assert from_flags(LongerToyOptions, values).max_seq_length == 384


def test_a_flag_already_defined_with_another_type_is_refused():
    values = flags.FlagValues()
    flags.DEFINE_string("max_seq_length", "128", "a string", flag_values=values)
    with pytest.raises(TypeError, match="--max_seq_length is already defined as string"):
        define_flags(ToyOptions, values)


@pytest.mark.parametrize("argv, message", [
    (["--bert_config_file=c", "--output_dir=o"], "--input_file is required"),
    ([*REQUIRED, "--train_batch_size=0"], "--train_batch_size must be positive, got 0"),
    ([*REQUIRED, "--max_seq_length=-1"], "--max_seq_length must be positive, got -1"),
    ([*REQUIRED, "--dropout=-0.5"], "--dropout must be >= 0, got -0.5"),
])
def test_validate_names_the_flag_in_one_line(argv, message):
    with pytest.raises(OptionError) as error:
        parse(ToyOptions, argv).validate()
    assert str(error.value) == message


def test_enum_values_are_checked_for_flags_and_for_library_users():
    with pytest.raises(OptionError, match="--mode"):
        parse(ToyOptions, [*REQUIRED, "--mode=slow"])
    with pytest.raises(OptionError, match="--strategy='gpu' is not one of default, one_device"):
        ToyOptions(input_file="x", output_dir="y", bert_config_file="z", strategy="gpu").validate()


def test_unknown_flags_and_stray_arguments_are_errors():
    with pytest.raises(OptionError, match="nonexistent"):
        parse(ToyOptions, ["--nonexistent=1"])
    with pytest.raises(OptionError, match="unexpected arguments: stray"):
        parse(ToyOptions, [*REQUIRED, "stray"])


def test_the_original_compatibility_flags_set_the_options_they_alias():
    options = parse(ToyOptions, [*REQUIRED, "--iterations_per_loop=7", "--use_tpu", "--tpu_name=my-tpu"])
    assert (options.steps_per_loop, options.strategy, options.tpu) == (7, "tpu", "my-tpu")
    assert (options.iterations_per_loop, options.use_tpu, options.tpu_name) == (None, False, None)  # one place
    assert parse(ToyOptions, [*REQUIRED, "--master=grpc://10.0.0.2:8470"]).tpu == "grpc://10.0.0.2:8470"
    both = parse(ToyOptions, [*REQUIRED, "--master=grpc://m", "--tpu_name=named"])
    assert both.tpu == "named"  # the original: FLAGS.tpu_name or FLAGS.master
    assert parse(ToyOptions, [*REQUIRED, "--steps_per_loop=9"]).steps_per_loop == 9
    # a resolved object can be copied with changes without the alias coming back
    assert dataclasses.replace(options, steps_per_loop=3).steps_per_loop == 3


def test_an_options_class_needs_a_known_type():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Bad(Options):
        layers: list = option(None, "A list.")

    with pytest.raises(TypeError, match="option layers"):
        define_flags(Bad, flags.FlagValues())


def test_relative_paths_in_a_flagfile_are_relative_to_its_folder(tmp_path, monkeypatch):
    configs = tmp_path / "configs"
    (configs / "more").mkdir(parents=True)
    (configs / "more" / "inner.flags").write_text("--vocab_file=vocab.txt\n--train_batch_size=4\n")
    (configs / "run.flags").write_text(
        "# a comment\n// another\n\n--bert_config_file=model.json\n--input_file=a/*.tfrecord,/abs/b.tfrecord\n"
        "--output_dir=gs://bucket/out\n--init_checkpoint=~/ckpt\n--flagfile=more/inner.flags\n--mode=exact\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    options = parse(ToyOptions, ["--flagfile", str(configs / "run.flags"), "--train_batch_size=8"])
    assert options.bert_config_file == str(configs / "model.json")
    assert options.input_file == f"{configs / 'a' / '*.tfrecord'},/abs/b.tfrecord"
    assert options.output_dir == "gs://bucket/out" and options.init_checkpoint == os.path.expanduser("~/ckpt")
    assert options.vocab_file == str(configs / "more" / "vocab.txt")
    assert options.mode == "exact" and options.train_batch_size == 8  # later flags win, as in absl
    relative = os.path.relpath(configs / "run.flags")
    assert parse(ToyOptions, [f"--flagfile={relative}"]).bert_config_file == str(configs / "model.json")


def test_command_line_paths_and_arguments_after_a_double_dash_stay_as_typed():
    assert expand_flagfiles(["--input_file=rel/x", "--", "--flagfile=f"], {"input_file"}) == \
        ["--input_file=rel/x", "--", "--flagfile=f"]


def test_a_missing_flagfile_is_one_error_naming_it(tmp_path):
    with pytest.raises(OptionError, match=f"--flagfile: cannot read {tmp_path / 'nope.flags'}"):
        parse(ToyOptions, [f"--flagfile={tmp_path / 'nope.flags'}"])


def test_the_trainer_strategies_are_the_declared_ones():
    import bert_tf._env  # noqa: F401
    from bert_tf.training import options, trainer
    assert tuple(trainer.STRATEGIES) == options.STRATEGIES
