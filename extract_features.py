"""Extract pre-computed feature vectors from BERT: the original release's script, run from a clone.

The program is bert_tf.tasks.extract_features, installed as `bert-tf-extract-features`; `--help` lists the flags.
"""
from bert_tf.tasks.extract_features import main

if __name__ == "__main__":
    main()
