"""Data sets for the BNN comparison: synthetic, scikit-learn bundled, UCI splits, MNIST.

>>> from ppl_bnn.data import load_dataset
>>> ds = load_dataset("gap", split=0)
>>> ds.n_train, ds.input_dim, ds.x_grid.shape
(100, 1, (300, 1))

Built-in sets (``sine``, ``gap``, ``diabetes``, ``digits``) need no files. The UCI sets, MNIST
and Fashion-MNIST are read from a data directory: the ``data_dir`` argument, else the environment
variable ``PPL_BNN_DATA``, else ``~/.cache/ppl_bnn/data`` (see :func:`resolve_data_dir`). Files
are checked against the SHA-256 manifest ``sha256sums.txt`` shipped with this package;
:func:`fetch` downloads a group of them from a mirror. A data file of your own (CSV, TSV,
Parquet, NPZ) reads with :func:`read_table`, as ``ppl-bnn compare`` reads it.
"""

from ppl_bnn.data.catalog import dataset_names, load_dataset, num_splits
from ppl_bnn.data.dataset import Dataset
from ppl_bnn.data.download import fetch
from ppl_bnn.data.errors import DatasetCorruptError, DatasetFetchError, DatasetNotFoundError
from ppl_bnn.data.files import DataFileError, read_table
from ppl_bnn.data.paths import resolve_data_dir

__all__ = [
    "DataFileError",
    "Dataset",
    "DatasetCorruptError",
    "DatasetFetchError",
    "DatasetNotFoundError",
    "dataset_names",
    "fetch",
    "load_dataset",
    "num_splits",
    "read_table",
    "resolve_data_dir",
]
