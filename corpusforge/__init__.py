"""corpusforge: prepare pretraining data (text, images, point clouds) as sharded Parquet."""

__version__ = "0.1.0"
