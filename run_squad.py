"""Fine-tune BERT on SQuAD v1.1 / v2.0: the original release's run_squad.py, from a clone.

The program is bert_tf.tasks.squad.program, installed as `bert-tf-squad`; `--help` lists the flags.
"""
from bert_tf.tasks.squad.program import main

if __name__ == "__main__":
    main()
