"""Text stages: normalization, quality filtering, deduplication, PII, augmentation, tokenization."""
