"""Reading inputs, writing sharded Parquet datasets, and opening them again."""
