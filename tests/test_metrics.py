"""GLUE metrics over all predictions, against their definitions worked by hand and known published values."""
import numpy as np
import pytest

from bert_tf.training import metrics


def test_matthews_correlation_matches_the_binary_formula_and_scikit_learns_documented_example():
    # scikit-learn's documentation example: MCC = -0.333...
    assert metrics.matthews_corrcoef([1, 1, 1, -1], [1, -1, 1, 1]) == pytest.approx(-1 / 3, abs=1e-12)
    rng = np.random.default_rng(0)
    labels, predictions = rng.integers(0, 2, 500), rng.integers(0, 2, 500)
    tp = np.sum((labels == 1) & (predictions == 1)); tn = np.sum((labels == 0) & (predictions == 0))
    fp = np.sum((labels == 0) & (predictions == 1)); fn = np.sum((labels == 1) & (predictions == 0))
    binary = (tp * tn - fp * fn) / np.sqrt(float((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)))
    assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx(binary, abs=1e-12)
    assert metrics.matthews_corrcoef(labels, labels) == pytest.approx(1.0)
    assert metrics.matthews_corrcoef(labels, np.zeros_like(labels)) == 0.0  # a constant prediction


def test_f1_and_accuracy_on_counts_worked_by_hand():
    labels = [1, 1, 1, 0, 0, 1, 0, 1]
    predictions = [1, 0, 1, 1, 0, 1, 0, 0]
    # tp 3, fp 1, fn 2: precision 3/4, recall 3/5
    assert metrics.f1(labels, predictions) == pytest.approx(2 * 0.75 * 0.6 / 1.35)
    assert metrics.accuracy(labels, predictions) == pytest.approx(5 / 8)
    assert metrics.f1([0, 0], [0, 0]) == 0.0


def test_pearson_and_spearman_match_their_definitions_with_ties():
    x = [1.0, 2.0, 2.0, 4.0, 5.0]
    y = [2.0, 1.0, 4.0, 3.0, 5.0]
    assert metrics.ranks(x).tolist() == [1.0, 2.5, 2.5, 4.0, 5.0]
    assert metrics.pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
    assert metrics.spearman(x, y) == pytest.approx(np.corrcoef(metrics.ranks(x), metrics.ranks(y))[0, 1], abs=1e-12)
    # SciPy's documented spearmanr example: rho = 0.8207826816681233
    assert metrics.spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(0.8207826816681233, abs=1e-12)
    assert metrics.pearson([1, 1, 1], [1, 2, 3]) == 0.0


def test_glue_metrics_equal_scikit_learn_and_scipy_on_real_dev_labels():
    from scipy import stats
    from sklearn import metrics as sk

    from shared_data import shared_path
    from bert_tf.tasks import glue_data

    rng = np.random.default_rng(7)
    mrpc = glue_data.read_examples(str(shared_path("glue", "MRPC")), glue_data.GLUE["mrpc"], "eval")
    labels = np.array([int(e.label) for e in mrpc])
    predicted = np.where(rng.random(len(labels)) < 0.2, 1 - labels, labels)  # a classifier 80% right
    assert metrics.accuracy(labels, predicted) == pytest.approx(sk.accuracy_score(labels, predicted), abs=1e-12)
    assert metrics.f1(labels, predicted) == pytest.approx(sk.f1_score(labels, predicted), abs=1e-12)
    assert metrics.matthews_corrcoef(labels, predicted) == pytest.approx(sk.matthews_corrcoef(labels, predicted),
                                                                         abs=1e-12)
    stsb = glue_data.read_examples(str(shared_path("glue", "STS-B")), glue_data.GLUE["sts-b"], "eval")
    scores = np.array([float(e.label) for e in stsb])  # many ties: scores are in steps of 0.2
    guesses = np.round(scores + rng.normal(0, 1, len(scores)), 1)
    assert metrics.pearson(guesses, scores) == pytest.approx(stats.pearsonr(guesses, scores)[0], abs=1e-12)
    assert metrics.spearman(guesses, scores) == pytest.approx(stats.spearmanr(guesses, scores)[0], abs=1e-12)
