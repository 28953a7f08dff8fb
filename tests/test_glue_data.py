"""The original's processors on the real GLUE / XNLI files, users' own tsv/csv, and bad rows named by file and line."""
import pytest

from shared_data import shared_path

from bert_tf.tasks import glue_data
from bert_tf.tasks.glue_data import ClassifierDataError, read_examples

# (task, split) -> examples in the shared files (line counts less the header; CoLA train/dev have none)
COUNTS = {("cola", "train"): 8551, ("cola", "eval"): 1043, ("cola", "predict"): 1063,
          ("sst-2", "train"): 67349, ("sst-2", "eval"): 872, ("sst-2", "predict"): 1821,
          ("mrpc", "train"): 3667, ("mrpc", "eval"): 408, ("mrpc", "predict"): 1725,
          ("sts-b", "train"): 5749, ("sts-b", "eval"): 1500, ("sts-b", "predict"): 1379,
          ("qqp", "train"): 3, ("qqp", "eval"): 2, ("qqp", "predict"): 1,
          ("mnli", "train"): 3, ("mnli", "eval"): 2, ("mnli", "eval_mismatched"): 2, ("mnli", "predict"): 1,
          ("mnli", "predict_mismatched"): 1,
          ("qnli", "train"): 3, ("qnli", "eval"): 5463, ("qnli", "predict"): 5463,
          ("rte", "train"): 2490, ("rte", "eval"): 277, ("rte", "predict"): 3000,
          ("wnli", "train"): 635, ("wnli", "eval"): 71, ("wnli", "predict"): 146}
FOLDERS = {"cola": "CoLA", "sst-2": "SST-2", "mrpc": "MRPC", "sts-b": "STS-B", "qqp": "QQP", "mnli": "MNLI",
           "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI"}


@pytest.mark.parametrize("task,split", sorted(COUNTS))
def test_every_glue_split_reads_every_row_with_labels_of_the_task(task, split):
    fmt = glue_data.GLUE[task]
    examples = read_examples(str(shared_path("glue", FOLDERS[task])), fmt, split)
    assert len(examples) == COUNTS[task, split]
    assert all(e.text_a for e in examples)
    pair = fmt.files[split].columns.text_b is not None
    assert all((e.text_b is not None) == pair for e in examples)
    if split.startswith("predict"):
        assert all(e.label is None for e in examples)
    elif fmt.labels is not None:
        assert {e.label for e in examples} <= set(fmt.labels)
    else:
        assert all(0.0 <= float(e.label) <= 5.0 for e in examples)


def test_fields_come_from_the_original_processors_columns():
    mnli = read_examples(str(shared_path("glue", "MNLI")), glue_data.GLUE["mnli"], "eval_mismatched")
    assert mnli[0].text_a.startswith("Your contribution helped make it possible")
    assert mnli[0].label == "contradiction"  # the last column (gold_label), as line[-1] in the original
    train = read_examples(str(shared_path("glue", "MNLI")), glue_data.GLUE["mnli"], "train")
    assert [e.label for e in train] == ["neutral", "entailment", "entailment"]  # 12-column train file
    cola = read_examples(str(shared_path("glue", "CoLA")), glue_data.GLUE["cola"], "eval")
    assert cola[0].text_a == "The sailors rode the breeze clear of the rocks." and cola[0].label == "1"
    test = read_examples(str(shared_path("glue", "QQP")), glue_data.GLUE["qqp"], "predict")
    assert test[0].guid == "predict-0" and test[0].text_a.startswith("Would the idea of Trump")
    mrpc = read_examples(str(shared_path("glue", "MRPC")), glue_data.GLUE["mrpc"], "predict")
    assert [e.guid for e in mrpc[:2]] == ["predict-0", "predict-1"]  # the leaderboard's index column


@pytest.mark.parametrize("language,count", [("ar", 2), ("zh", 0)])
def test_xnli_keeps_only_the_rows_of_the_chosen_language(language, count):
    fmt = glue_data.xnli_format(language)
    dev = read_examples(str(shared_path("glue", "XNLI")), fmt, "eval")
    assert len(dev) == count
    assert all(e.label in glue_data.NLI for e in dev)


def test_xnli_train_reads_multinli_translations_and_renames_contradictory(tmp_path):
    (tmp_path / "multinli").mkdir()
    (tmp_path / "multinli" / "multinli.train.de.tsv").write_text(
        "premise\thypo\tlabel\nDas ist gut.\tDas ist schlecht.\tcontradictory\nJa.\tJa.\tentailment\n",
        encoding="utf-8")
    train = read_examples(str(tmp_path), glue_data.xnli_format("de"), "train")
    assert [(e.text_a, e.label) for e in train] == [("Das ist gut.", "contradiction"), ("Ja.", "entailment")]


def test_own_tsv_and_csv_find_columns_by_header_name(tmp_path):
    (tmp_path / "train.csv").write_text('id,review,stars\n1,"Good, really",pos\n2,"He said ""no""",neg\n',
                                        encoding="utf-8")
    (tmp_path / "test.csv").write_text('review,id\n"Fine, fine",7\n', encoding="utf-8")
    fmt = glue_data.own_data_format(str(tmp_path), "csv", "review", None, "stars", ("neg", "pos"))
    train = read_examples(str(tmp_path), fmt, "train")
    assert [(e.text_a, e.label) for e in train] == [("Good, really", "pos"), ('He said "no"', "neg")]
    test = read_examples(str(tmp_path), fmt, "predict")
    assert [(e.text_a, e.label) for e in test] == [("Fine, fine", None)]
    with pytest.raises(ClassifierDataError, match=r"train\.csv: no column 'text' \(--text_a_column\); its "
                                                  r"header has 'id', 'review', 'stars'"):
        glue_data.own_data_format(str(tmp_path), "csv", "text", None, "stars", None)


def test_bad_rows_and_labels_name_the_file_and_line(tmp_path):
    fmt = glue_data.GLUE["rte"]
    (tmp_path / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\n",
                                        encoding="utf-8")
    with pytest.raises(ClassifierDataError, match=r"train\.tsv:3: expected at least 4 tab-separated columns, "
                                                  r"found 3$"):
        read_examples(str(tmp_path), fmt, "train")
    (tmp_path / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n", encoding="utf-8")
    with pytest.raises(ClassifierDataError, match=r"dev\.tsv:2: label 'maybe' is not one of the task's labels "
                                                  r"entailment, not_entailment$"):
        read_examples(str(tmp_path), fmt, "eval")
    with pytest.raises(ClassifierDataError, match=r"^--data_dir: no test\.tsv in "):
        read_examples(str(tmp_path), fmt, "predict")
    (tmp_path / "dev.tsv").write_text("i\tg\tf\ty\to\ts1\ts2\ta\tb\tscore\n0\t\t\t\t\t\t\tx\ty\tfive\n")
    with pytest.raises(ClassifierDataError, match=r"dev\.tsv:2: label 'five' is not a number"):
        read_examples(str(tmp_path), glue_data.GLUE["sts-b"], "eval")
    (tmp_path / "dev.tsv").write_bytes(b"index\tsentence1\tsentence2\tlabel\n0\t\xff\tb\tentailment\n")
    with pytest.raises(ClassifierDataError, match=r"dev\.tsv: not UTF-8 text"):
        read_examples(str(tmp_path), fmt, "eval")
