"""Fine-tune BERT on sentence (pair) classification: the original release's run_classifier.py, from a clone.

The program is bert_tf.tasks.classifier, installed as `bert-tf-classifier`; `--help` lists the flags.
"""
from bert_tf.tasks.classifier import main

if __name__ == "__main__":
    main()
