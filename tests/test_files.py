"""One comma-glob expander for every program, on the shared corpus files."""
import hashlib
import os

import pytest

from shared_data import shared_path

from bert_tf.data.files import NoMatchingFileError, expand_globs, file_sha256, local_files
from bert_tf.errors import BertTfError


def wiki_spec() -> tuple[str, list[str]]:
    """A spec of two globs and a plain path repeated, and the files it must give, in order."""
    corpus = shared_path("corpus")
    ab = sorted(str(p) for p in (corpus / "wiki" / "AB").glob("wiki_0*"))
    aa = sorted(str(p) for p in (corpus / "wiki" / "AA").glob("wiki_0*"))
    book = sorted(str(p) for p in (corpus / "books").glob("*.txt"))[0]
    spec = f"{corpus}/wiki/AB/wiki_0*, {book},{corpus}/wiki/AA/wiki_0*,,{ab[0]},{book}"
    return spec, ab + [book] + aa


def test_patterns_expand_in_the_order_given_sorted_within_a_glob_each_file_once():
    spec, expected = wiki_spec()
    assert len(expected) >= 4
    assert expand_globs(spec) == expected
    assert expand_globs(spec.split(",")) == expected  # a list of parts is the same spec


def test_a_pattern_matching_nothing_is_one_error_naming_the_flag_and_the_pattern(tmp_path):
    spec, _ = wiki_spec()
    with pytest.raises(NoMatchingFileError) as error:
        expand_globs(f"{spec},{tmp_path}/none-*.txt", what="--input")
    assert str(error.value) == f"--input: '{tmp_path}/none-*.txt' matches no file"
    assert isinstance(error.value, BertTfError) and isinstance(error.value, FileNotFoundError)
    with pytest.raises(NoMatchingFileError, match=f"--input_file: '{tmp_path}/missing.txt' matches no file"):
        expand_globs(f"{tmp_path}/missing.txt")


def test_a_spec_naming_nothing_is_an_error():
    for spec in ("", " , ,", []):
        with pytest.raises(NoMatchingFileError, match="--vocab_input: names no file"):
            expand_globs(spec, what="--vocab_input")


def test_only_files_count_and_a_file_named_with_glob_characters_is_taken_literally(tmp_path):
    (tmp_path / "shard-1").mkdir()
    (tmp_path / "shard-2.txt").write_text("x\n")
    literal = tmp_path / "odd[1].txt"
    literal.write_text("y\n")
    assert expand_globs(f"{tmp_path}/shard-*") == [f"{tmp_path}/shard-2.txt"]
    assert local_files(str(literal)) == [str(literal)]
    with pytest.raises(NoMatchingFileError):
        expand_globs(str(tmp_path / "shard-1"))


def test_another_filesystem_plugs_in_its_own_matcher_under_the_same_rules():
    seen = []

    def remote(pattern: str) -> list[str]:
        seen.append(pattern)
        return {"gs://b/x-*": ["gs://b/x-2", "gs://b/x-1"], "gs://b/x-1": ["gs://b/x-1"]}.get(pattern, [])

    assert expand_globs("gs://b/x-*,gs://b/x-1", match=remote) == ["gs://b/x-1", "gs://b/x-2"]
    assert seen == ["gs://b/x-*", "gs://b/x-1"]
    with pytest.raises(NoMatchingFileError, match="'gs://b/y' matches no file"):
        expand_globs("gs://b/y", match=remote)


def test_every_program_expands_a_spec_alike():
    from bert_tf.pretraining import corpus, input_pipeline, instances
    spec, expected = wiki_spec()
    assert instances.expand_input_patterns(spec) == expected
    assert corpus.expand_inputs(spec.split(",")) == expected
    assert input_pipeline.expand_input_files(spec) == expected
    beam = pytest.importorskip("bert_tf.pretraining.beam")
    assert beam.expand_inputs(spec) == expected


def test_file_sha256_is_the_digest_of_the_files_bytes_over_several_blocks():
    book = shared_path("corpus", "books", "1399-0.txt")
    assert os.path.getsize(book) > 1 << 20  # more than one read block
    assert file_sha256(book) == hashlib.sha256(book.read_bytes()).hexdigest()
