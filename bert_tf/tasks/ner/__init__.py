"""Token tagging (named-entity recognition): CoNLL data, features, the task, conlleval scoring."""
