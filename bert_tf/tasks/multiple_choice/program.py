"""run_swag.py: multiple choice (SWAG) by fine-tuning, as the paper's section 4.4.

--data_dir holds SWAG's train.csv, val.csv and test.csv (--task_name=swag), or your own train, dev
and test files as .jsonl or .csv (--task_name=multiple_choice; formats in
bert_tf.tasks.multiple_choice.data). Each choice is packed as `[CLS] context [SEP] question + ending
[SEP]`, its pooled vector scored by one learned vector, and a softmax runs over the choices.
--do_train fine-tunes on the train file; --do_eval reports eval_accuracy and eval_loss on the dev
file (eval_results.txt); --do_predict scores the test file (test_results.txt when it is labelled).
Per split, eval_predictions.tsv / test_predictions.tsv hold each example's predicted choice and the
choices' probabilities.

The defaults are the paper's SWAG fine-tuning: 3 epochs, learning rate 2e-5, batch size 16 (and the
original code's warmup proportion 0.1 and 128 tokens per choice).

Without SWAG, a proxy set in its layout from a book that the model was not pre-trained on
(bert_tf.tasks.multiple_choice.proxy_set), and pre-trained weights against a random start:

    python data_prep/make_multiple_choice.py --input=BOOKS/1399-0.txt --output_dir=swag_proxy
    python run_swag.py --data_dir=swag_proxy --init_checkpoint=MODEL --output_dir=pretrained \\
        --do_train --do_eval --do_predict
    python run_swag.py --data_dir=swag_proxy --bert_config_file=MODEL/bert_config.json \\
        --vocab_file=MODEL/vocab.txt --output_dir=random_init --do_train --do_eval --do_predict
"""
from __future__ import annotations

import dataclasses

from bert_tf.options import OptionError, option
from bert_tf.tasks import finetune
from bert_tf.tasks.finetune import FinetuningOptions
from bert_tf.tasks.multiple_choice.data import FORMATS
from bert_tf.tasks.multiple_choice.task import MultipleChoiceTask

__all__ = ["SwagOptions", "make_task", "run", "main"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class SwagOptions(FinetuningOptions):
    """run_swag.py's flags: the fine-tuning options (the paper's SWAG defaults) plus the data."""

    train_batch_size: int = option(16, "Total (global) batch size for training (the paper's SWAG: 16).",
                                   positive=True)
    learning_rate: float = option(2e-5, "The initial learning rate for Adam (the paper's SWAG: 2e-5).",
                                  positive=True)
    task_name: str = option("swag", "swag: SWAG's train.csv, val.csv, test.csv; multiple_choice: your own "
                            "train, dev and test .jsonl or .csv (context, question, choices, label).",
                            enum=FORMATS)
    data_dir: str | None = option(None, "The input data dir: the task's train, dev (SWAG: val) and test files.",
                                  required=True, path=True)
    num_choices: int = option(4, "The number of choices of every example (SWAG: 4).", minimum=2)

    def validate(self) -> None:
        if self.task_name == "swag" and self.num_choices != 4:
            raise OptionError(f"--task_name=swag has 4 choices (ending0..3), not --num_choices={self.num_choices}")
        super().validate()


def make_task(options: SwagOptions) -> MultipleChoiceTask:
    """The task of the options, with the tokenizer of --vocab_file and --do_lower_case."""
    from bert_tf.text.tokenization import FullTokenizer

    tokenizer = FullTokenizer(options.vocab_file, do_lower_case=options.do_lower_case)
    trim = options.dynamic_padding and options.strategy != "tpu"
    return MultipleChoiceTask(options.task_name, options.data_dir, tokenizer, options.max_seq_length,
                              options.num_choices, trim_batches=trim)


def run(options: SwagOptions) -> dict[str, float]:
    """Fine-tunes / evaluates / predicts as the options say; returns the dev figures (if evaluated)."""
    options = finetune.resolve(options)
    return finetune.run(options, make_task(options))


def main(argv: list[str] | None = None) -> None:
    """`bert-tf-swag` / run_swag.py."""
    from bert_tf import cli

    cli.run_program(run, SwagOptions, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
