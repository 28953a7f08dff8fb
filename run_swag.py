"""Fine-tune BERT for multiple choice (SWAG): the paper's section 4.4, from a clone.

The program is bert_tf.tasks.multiple_choice.program, installed as `bert-tf-swag`; `--help` lists the flags.
Build a SWAG-layout proxy set from a held-back book with data_prep/make_multiple_choice.py.
"""
from bert_tf.tasks.multiple_choice.program import main

if __name__ == "__main__":
    main()
