"""Checks shared by the tests of the task heads' checkpoints."""
import pathlib

import numpy as np

from bert_tf.checkpoints import convert as convert_cli
from bert_tf.checkpoints import read_tf1_checkpoint


def assert_hf_folder_converts_back_to_the_same_weights(export: pathlib.Path, hf_folder: pathlib.Path,
                                                       back: pathlib.Path) -> None:
    """`bert-tf-convert hf-to-tf1` of `hf_folder` (made from `export`) gives every weight of `export` exactly."""
    assert convert_cli.main(["hf-to-tf1", f"--input_dir={hf_folder}", f"--output_dir={back}"]) == 0
    converted = read_tf1_checkpoint(str(back / "bert_model.ckpt"))
    original = read_tf1_checkpoint(str(export / "bert_model.ckpt"))
    assert set(converted) == set(original)
    for name in converted:
        np.testing.assert_array_equal(converted[name], original[name], err_msg=name)
