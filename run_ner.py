"""Fine-tune BERT for token tagging (CoNLL-2003 named entities): the paper's section 5.3, from a clone.

The program is bert_tf.tasks.ner.program, installed as `bert-tf-ner`; `--help` lists the flags.
Score a predictions file again with `bert-tf-conlleval FILE`.
"""
from bert_tf.tasks.ner.program import main

if __name__ == "__main__":
    main()
