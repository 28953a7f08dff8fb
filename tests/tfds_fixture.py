"""TensorFlow Datasets GLUE, SQuAD and CoNLL-2003 datasets prepared offline from the shared files, for tests.

The real builder of tensorflow-datasets (`glue/<config>`, `squad/v<version>`, `conll2003`) prepares
it: its own split generators, example parsing, idx numbering, shuffling writer and
`dataset_info.json`. Only its downloads are served locally: tfds looks a registered URL up in its
download cache under the name derived from the URL and the registered sha256
(`<download_dir>/glue/<name><checksum>`, with an `.INFO` file beside it) and trusts a file found
there without hashing it again. We place there what each URL would have delivered, rebuilt from
the shared files:

- GLUE's zips (`CoLA.zip`, `STS-B.zip`, `MNLI.zip`, ...): a zip of the shared `<folder>/*.tsv` under
  the folder name the builder expects; tfds extracts it itself.
- MRPC, which tfds builds from Microsoft's original files: `msr_paraphrase_train.txt` is our
  train.tsv followed by dev.tsv's rows (GLUE's dev split is the pairs listed in `mrpc_dev_ids.tsv`,
  which we write from dev.tsv's ids), and `msr_paraphrase_test.txt` is our test.tsv (tfds reads only
  its two string columns). Each split keeps its file order, so tfds's `idx` orders the examples as the
  tsv files do; train/dev idx values are offsets in this rebuilt file, not in Microsoft's.
- CoNLL-2003's `conll2003.zip` (data.deepai.org), whose checksum tfds does not register: a zip of
  the given train.txt, valid.txt and test.txt at its root, cached under the name derived from the
  URL alone, its `.INFO` holding the size and sha256 computed from what we wrote.

The cached files do not have the registered checksums (they are rebuilt, and MRPC's train.tsv here
lacks one pair); a checksum-validated route (tfds's `manual_dir`) would reject them for that reason.
Nothing is downloaded: `try_download_gcs=False`, and every URL the builder asks for is cached.
Uses tfds internals of the pinned 4.9.10 (`resource.get_dl_fname`, `resource.write_info_file`, the GLUE
module's MRPC URLs), and importlib_resources (requirements-test.txt), which tfds 4.9.10 imports to
prepare any dataset without declaring it on Python >= 3.9.
"""
from __future__ import annotations

import csv
import io
import pathlib
import zipfile

from shared_data import shared_path

MRPC = "mrpc"
CONLL2003_URL = "https://data.deepai.org/conll2003.zip"  # the conll2003 builder's download


def build_local_glue(task: str, data_dir: pathlib.Path) -> str:
    """Prepares `glue/<task>` (a tfds config name: mrpc, stsb, rte, mnli, ...) from the shared tsv
    files into the tfds data_dir `data_dir`; returns that data_dir as a string."""
    import tensorflow_datasets as tfds

    tfds.display_progress_bar(False)
    builder = tfds.builder(f"glue/{task}", data_dir=str(data_dir))
    if not builder.is_prepared():
        downloads = pathlib.Path(data_dir) / "downloads"
        for url, content in _downloads(builder.builder_config).items():
            _cache_download(builder, downloads, url, content)
        builder.download_and_prepare(
            download_dir=str(downloads),
            download_config=tfds.download.DownloadConfig(try_download_gcs=False))
    return str(data_dir)


def build_local_squad(version: str, data_dir: pathlib.Path, train: bytes, dev: bytes) -> str:
    """Prepares `squad/v<version>` (1.1 or 2.0) into the tfds data_dir `data_dir` with its real builder,
    serving `train` and `dev` (SQuAD json bytes) as its train-/dev-v<version>.json downloads."""
    import os

    import tensorflow_datasets as tfds

    tfds.display_progress_bar(False)
    builder = tfds.builder(f"squad/v{version}", data_dir=str(data_dir))
    if not builder.is_prepared():
        downloads = pathlib.Path(data_dir) / "downloads"
        base = "https://rajpurkar.github.io/SQuAD-explorer/dataset/"  # the builder's _URL
        config = builder.builder_config
        for name, content in ((config.train_file, train), (config.dev_file, dev)):
            _cache_download(builder, downloads, os.path.join(base, name), content)
        builder.download_and_prepare(download_dir=str(downloads),
                                     download_config=tfds.download.DownloadConfig(try_download_gcs=False))
    return str(data_dir)


def build_local_conll2003(data_dir: pathlib.Path, train: bytes, dev: bytes, test: bytes) -> str:
    """Prepares `conll2003` into the tfds data_dir `data_dir` with its real builder, serving `train`,
    `dev` and `test` (CoNLL-format bytes) as the train.txt, valid.txt and test.txt of its zip download."""
    import tensorflow_datasets as tfds

    tfds.display_progress_bar(False)
    builder = tfds.builder("conll2003", data_dir=str(data_dir))
    if not builder.is_prepared():
        downloads = pathlib.Path(data_dir) / "downloads"
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for name, content in (("train.txt", train), ("valid.txt", dev), ("test.txt", test)):
                archive.writestr(name, content)
        _cache_unregistered_download(builder, downloads, CONLL2003_URL, buffer.getvalue())
        builder.download_and_prepare(download_dir=str(downloads),
                                     download_config=tfds.download.DownloadConfig(try_download_gcs=False))
    return str(data_dir)


def _downloads(config) -> dict[str, bytes]:
    """What each URL of the GLUE config would deliver, rebuilt from the shared folder."""
    folder = shared_path("glue", config.data_dir)
    if config.name == MRPC:
        from tensorflow_datasets.text import glue
        return {glue._MRPC_TRAIN: _mrpc_train(folder), glue._MRPC_DEV_IDS: _mrpc_dev_ids(folder),
                glue._MRPC_TEST: (folder / "test.tsv").read_bytes()}
    return {config.data_url: _zip(folder, config.data_dir)}


def _zip(folder: pathlib.Path, name: str) -> bytes:
    """The shared `folder`'s tsv files as a GLUE zip holding `name/<file>.tsv`."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.glob("*.tsv")):
            archive.write(path, f"{name}/{path.name}")
    return buffer.getvalue()


def _mrpc_train(folder: pathlib.Path) -> bytes:
    """train.tsv (with its BOM header) followed by dev.tsv's rows: Microsoft's training file layout."""
    dev_rows = (folder / "dev.tsv").read_bytes().split(b"\n", 1)[1]
    train = (folder / "train.tsv").read_bytes()
    return train + (b"" if train.endswith(b"\n") else b"\n") + dev_rows


def _mrpc_dev_ids(folder: pathlib.Path) -> bytes:
    """"#1 ID<TAB>#2 ID" of every dev.tsv pair, no header, as GLUE's mrpc_dev_ids.tsv."""
    with open(folder / "dev.tsv", encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    return "".join(f"{row[1]}\t{row[2]}\n" for row in rows).encode()


def _cache_download(builder, downloads: pathlib.Path, url: str, content: bytes) -> None:
    """Writes `content` where tfds's DownloadManager looks for an already downloaded `url`."""
    from tensorflow_datasets.core.download import resource

    info = builder.url_infos[url]
    path = downloads / builder.name / resource.get_dl_fname(url, info.checksum)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    resource.write_info_file(url=url, path=path, dataset_name=builder.name,
                             original_fname=info.filename or url.rsplit("/", 1)[-1], url_info=info)


def _cache_unregistered_download(builder, downloads: pathlib.Path, url: str, content: bytes) -> None:
    """Writes `content` where tfds's DownloadManager looks for an already downloaded `url` that has no
    registered checksum (its cache name comes from the URL alone; the `.INFO` file gives size and sha256)."""
    from tensorflow_datasets.core.download import checksums, resource

    path = downloads / builder.name / resource.get_dl_fname(url, None)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    resource.write_info_file(url=url, path=path, dataset_name=builder.name,
                             original_fname=url.rsplit("/", 1)[-1], url_info=checksums.compute_url_info(path))
