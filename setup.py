"""bert_tf: Google's BERT, faithfully, in TensorFlow 2 / Keras 3."""
import pathlib

from setuptools import Extension, find_packages, setup

HERE = pathlib.Path(__file__).parent


def _requirements(name):
    lines = (HERE / name).read_text().splitlines()
    return [l.split("#")[0].strip() for l in lines if l.split("#")[0].strip() and not l.startswith("-")]


setup(
    name="bert_tf",
    version="0.1.0",
    description="A TensorFlow 2 / Keras 3 reproduction of Google's BERT: data prep, pretraining, fine-tuning",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.11,<3.12",
    packages=find_packages(include=["bert_tf", "bert_tf.*"]),
    # Compiled on first use against the installed TensorFlow (bert_tf.model.custom_ops), so it ships as source.
    package_data={"bert_tf.model": ["custom_ops.cc"]},
    # The fast tokenizer's native engine. Optional: without a C compiler the install still works and
    # FastTokenizer runs on tensorflow-text instead (same ids, slower).
    ext_modules=[Extension("bert_tf.text._wordpiece", ["bert_tf/text/_wordpiece.c"], optional=True,
                           extra_compile_args=["-O3", "-std=c99"])],
    install_requires=_requirements("requirements.txt"),
    extras_require={
        # Parity tests and benchmarks against peers; never needed at run time.
        "test": _requirements("requirements-test.txt"),
        # The data-prep pipeline on Apache Beam runners (Dataflow, Flink, Spark, DirectRunner).
        "beam": ["apache-beam[tfrecord]==2.77.0"],
        # create_vocab --learner=tokenizers: Hugging Face's Rust WordPiece trainer, for a whole Wikipedia.
        "vocab": ["tokenizers==0.23.3"],
        # Reading GLUE / SQuAD / CoNLL by their TensorFlow Datasets names, for users who have that data.
        # tensorflow-datasets 4.9.10 imports importlib_resources when it prepares a dataset (`tfds build`,
        # DatasetBuilder.code_path) but declares it only for Python < 3.9.
        "tfds": ["tensorflow-datasets==4.9.10", "importlib_resources==7.1.0"],
    },
    entry_points={
        "console_scripts": [
            "bert-tf-pretrain=bert_tf.pretraining.program:main",
            "bert-tf-create-pretraining-data=bert_tf.pretraining.create_pretraining_data:main",
            "bert-tf-beam-create-pretraining-data=bert_tf.pretraining.beam_create_pretraining_data:main",
            "bert-tf-prepare-corpus=bert_tf.pretraining.prepare_corpus:main",
            "bert-tf-create-vocab=bert_tf.text.create_vocab:main",
            "bert-tf-extract-features=bert_tf.tasks.extract_features:main",
            "bert-tf-convert=bert_tf.checkpoints.convert:main",
            "bert-tf-squad-evaluate=bert_tf.tasks.squad.evaluate:main",
            "bert-tf-build-kernels=bert_tf.model.custom_ops:main",
            "bert-tf-classifier=bert_tf.tasks.classifier:main",
            "bert-tf-squad=bert_tf.tasks.squad.program:main",
            "bert-tf-ner=bert_tf.tasks.ner.program:main",
            "bert-tf-conlleval=bert_tf.tasks.ner.conlleval:main",
            "bert-tf-export=bert_tf.export.program:main",
            "bert-tf-swag=bert_tf.tasks.multiple_choice.program:main",
            "bert-tf-make-multiple-choice=bert_tf.tasks.multiple_choice.proxy_set:main",
        ],
    },
    license="Apache-2.0",
)
