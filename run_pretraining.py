"""Pre-train BERT (masked LM + next sentence): the original release's script, run from a clone.

The program is bert_tf.pretraining.program, installed as `bert-tf-pretrain`; `--help` lists the flags.
"""
from bert_tf.pretraining.program import main

if __name__ == "__main__":
    main()
