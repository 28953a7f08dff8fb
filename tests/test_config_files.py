"""The shipped configs/: every model config loads and validates, every flagfile parses with run_pretraining's
options and names a config beside it, and the paper's Table 6 model sizes are all there."""
import pathlib

import pytest

import bert_tf._env  # noqa: F401
from bert_tf.model.configs import BertConfig
from bert_tf.options import parse
from bert_tf.pretraining.program import PretrainingOptions

CONFIGS = pathlib.Path(__file__).resolve().parent.parent / "configs"
TABLE_6 = [(3, 768, 12), (6, 768, 3), (6, 768, 12), (12, 768, 12), (12, 1024, 16), (24, 1024, 16)]


def _config(path: pathlib.Path) -> BertConfig:
    config = BertConfig.from_json_file(str(path))
    config.validate(source=str(path))
    return config


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.flags")), ids=lambda p: p.name)
def test_each_flagfile_parses_and_names_a_config_beside_it(path):
    options = parse(PretrainingOptions, [f"--flagfile={path}"])
    config = pathlib.Path(options.bert_config_file)
    assert config.parent == CONFIGS and config.is_file()
    _config(config)


def test_every_model_size_of_the_papers_table_6_has_a_config():
    shapes = {(c.num_hidden_layers, c.hidden_size, c.num_attention_heads): c
              for c in map(_config, CONFIGS.glob("*_config.json"))}
    for shape in TABLE_6:
        assert shape in shapes, shape
        assert shapes[shape].intermediate_size == 4 * shape[1]
